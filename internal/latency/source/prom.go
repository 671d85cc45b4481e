package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/numatrace/numatrace/internal/latency"
)

// Histogram is a cumulative Prometheus histogram summed over its series:
// upper bound (seconds) → requests at or below it.
type Histogram struct {
	Bounds []float64 // sorted; the last is +Inf
	Counts []float64 // cumulative
	Count  float64
}

// maxScrapeBytes bounds one scrape's response.
const maxScrapeBytes = 16 << 20

// Scrape fetches url and returns the histogram named metric, summed over
// every label set.
func Scrape(ctx context.Context, client *http.Client, url, metric string) (*Histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	// A metrics page is kilobytes to a few MB: a larger body is not one,
	// and the parser would hold all of it.
	body := &io.LimitedReader{R: resp.Body, N: maxScrapeBytes + 1}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if body.N <= 0 {
		return nil, fmt.Errorf("scrape %s: the response is over %d MiB", url, maxScrapeBytes>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	fam, ok := fams[metric]
	if !ok {
		return nil, fmt.Errorf("scrape %s: no metric %q", url, metric)
	}
	if fam.GetType() != dto.MetricType_HISTOGRAM {
		return nil, fmt.Errorf("scrape %s: %q is a %s, not a histogram", url, metric, strings.ToLower(fam.GetType().String()))
	}
	sum := map[float64]float64{}
	h := &Histogram{}
	for _, m := range fam.GetMetric() {
		hist := m.GetHistogram()
		hasInf := false
		for _, b := range hist.GetBucket() {
			sum[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			hasInf = hasInf || math.IsInf(b.GetUpperBound(), 1)
		}
		if !hasInf { // the +Inf bucket is the sample count
			sum[math.Inf(1)] += float64(hist.GetSampleCount())
		}
		h.Count += float64(hist.GetSampleCount())
	}
	for b := range sum {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, sum[b])
	}
	return h, nil
}

// unitNs is what one unit of the metric is in ns, from its name's suffix:
// Prometheus convention is seconds.
func unitNs(metric string) float64 {
	switch {
	case strings.HasSuffix(metric, "_milliseconds"), strings.HasSuffix(metric, "_ms"):
		return 1e6
	case strings.HasSuffix(metric, "_microseconds"), strings.HasSuffix(metric, "_us"):
		return 1e3
	}
	return 1e9
}

// A window whose scrapes cannot be subtracted is skipped, with one of
// these.
var (
	// ErrCounterReset: a count went back between the scrapes, as when
	// the service restarts.
	ErrCounterReset = errors.New("the histogram's counters went back (the service restarted?)")
	// ErrLayoutChanged: the scrapes have different buckets, or buckets
	// that do not add up, so a bucket's difference means nothing.
	ErrLayoutChanged = errors.New("the histogram's buckets changed")
)

// Delta computes one window's statistics from two scrapes of the same
// histogram: the requests between them, and p50/p99 interpolated inside
// the buckets as histogram_quantile does. Max is the upper bound of the
// highest bucket that gained requests (the lower bound for +Inf). A
// counter reset or a change of buckets between the scrapes is an error:
// the window cannot be told.
func Delta(index uint64, prev, cur *Histogram, metric string) (*latency.Stats, error) {
	st := &latency.Stats{Index: index}
	if len(prev.Bounds) != len(cur.Bounds) {
		return nil, ErrLayoutChanged
	}
	if cur.Count < prev.Count {
		return nil, ErrCounterReset
	}
	d := make([]float64, len(cur.Bounds))
	for i, b := range cur.Bounds {
		if prev.Bounds[i] != b {
			return nil, ErrLayoutChanged
		}
		if d[i] = cur.Counts[i] - prev.Counts[i]; d[i] < 0 {
			return nil, ErrCounterReset
		}
		if i > 0 && d[i] < d[i-1] { // cumulative buckets: each holds the ones below
			return nil, ErrLayoutChanged
		}
	}
	total := d[len(d)-1]
	if total <= 0 {
		return st, nil
	}
	unit := unitNs(metric)
	quantile := func(q float64) uint64 {
		rank := q * total
		for i, c := range d {
			if c >= rank {
				lo, hi := 0.0, cur.Bounds[i]
				below := 0.0
				if i > 0 {
					lo, below = cur.Bounds[i-1], d[i-1]
				}
				if math.IsInf(hi, 1) {
					return uint64(lo * unit)
				}
				if c == below {
					return uint64(hi * unit)
				}
				return uint64((lo + (hi-lo)*(rank-below)/(c-below)) * unit)
			}
		}
		return 0
	}
	st.Count = uint64(total)
	st.P50Ns, st.P99Ns, st.P999Ns = quantile(0.5), quantile(0.99), quantile(0.999)
	for i := len(d) - 1; i >= 0; i-- {
		below := 0.0
		if i > 0 {
			below = d[i-1]
		}
		if d[i] > below {
			b := cur.Bounds[i]
			if math.IsInf(b, 1) && i > 0 {
				b = cur.Bounds[i-1]
			}
			st.MaxNs = uint64(b * unit)
			break
		}
	}
	return st, nil
}

// Why a scraped window is skipped (latency.Stats.Skipped).
const (
	skipWhyFailed = "scrape failed"
	skipWhyNoBase = "no scrape at its start"
	skipWhyReset  = "counter reset"
	skipWhyLayout = "bucket layout change"
)

// ScrapeWindows scrapes at every window end and sends each window's
// statistics, until ctx ends. The first scrape, at the start, is the
// base. A window that cannot be told (its scrape, or the one before,
// failed; the counters went back; the buckets changed) is sent skipped,
// so that it counts neither as normal nor as one in which nothing
// completed; skip hears why, by kind.
func ScrapeWindows(ctx context.Context, url, metric string, start time.Time, window time.Duration,
	out chan<- latency.Stats, skip func(kind latency.SkipKind, err error)) {
	client := &http.Client{Timeout: window / 2}
	prev, err := Scrape(ctx, client, url, metric)
	if err != nil && skip != nil {
		skip(latency.SkipScrapes, err)
	}
	for i := uint64(0); ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(i+1) * window))):
		}
		cur, err := Scrape(ctx, client, url, metric)
		var st *latency.Stats
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if skip != nil {
				skip(latency.SkipScrapes, err)
			}
			st = &latency.Stats{Index: i, Skipped: skipWhyFailed}
		case prev == nil:
			st = &latency.Stats{Index: i, Skipped: skipWhyNoBase}
		default:
			if st, err = Delta(i, prev, cur, metric); err != nil {
				why, kind := skipWhyReset, latency.SkipResets
				if errors.Is(err, ErrLayoutChanged) {
					why, kind = skipWhyLayout, latency.SkipLayouts
				}
				if skip != nil {
					skip(kind, fmt.Errorf("window %d: %w", i, err))
				}
				st = &latency.Stats{Index: i, Skipped: why}
			}
		}
		prev = cur // nil after a failure: the next window has no base either
		select {
		case out <- *st:
		case <-ctx.Done():
			return
		}
	}
}
