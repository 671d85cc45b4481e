package latency

// Reading is what a source reports: one request, or the statistics of a
// whole window (a scraped histogram already summarises one).
type Reading struct {
	Sample Sample
	Window *Stats // set for a whole window's statistics
}
