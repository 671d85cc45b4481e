//go:build linux

package tracer

import (
	"testing"

	"github.com/numatrace/numatrace/internal/latency/exchange"
	"github.com/numatrace/numatrace/internal/stall"
)

// A request timer's record decodes into what the exchange package takes,
// and no more: the breakdown where LAT_STALLS says it is known, the
// serving thread's totals for a connection's exchange only, LAT_PLAIN as
// totals to take from the connection's record before, LAT_PIPELINED as
// pipelined.
func TestTimerRecordsDecode(t *testing.T) {
	var r timerRing
	s := typesLatSample{TsNs: 5000, LatNs: 300, Tid: 7, Conn: 0xffff1234,
		Flags: uint32(typesLatFlagLAT_STALLS | typesLatFlagLAT_PIPELINED)}
	s.StallNs[stall.MemcgReclaim], s.StallNs[stall.NumCauses] = 40, 40
	s.TotalsNs[stall.MemcgReclaim] = 900
	got := r.decode(&s)
	want := exchange.Record{EndNs: 5000, LatNs: 300, TID: 7, Conn: 0xffff1234, Pipelined: true, Stall: got.Stall}
	want.Totals[stall.MemcgReclaim] = 900
	if got != want || got.Stall == nil || got.Stall.ByCause[stall.MemcgReclaim] != 40 || got.Stall.FreezeNs != 40 {
		t.Errorf("an exchange's record decodes to %+v (stall %+v), want %+v", got, got.Stall, want)
	}

	call := typesLatSample{TsNs: 5000, LatNs: 300, Tid: 7} // a uprobe's, its breakdown unknown
	call.TotalsNs[0] = 1                                   // not a connection's: not read
	if got := r.decode(&call); got != (exchange.Record{EndNs: 5000, LatNs: 300, TID: 7}) {
		t.Errorf("a call's record decodes to %+v", got)
	}

	plain := typesLatSample{TsNs: 5000, LatNs: 300, Tid: 7, Conn: 9, Flags: uint32(typesLatFlagLAT_STALLS | typesLatFlagLAT_PLAIN)}
	if got := r.decode(&plain); !got.TotalsSame || got.Stall == nil || *got.Stall != (stall.RequestStall{}) {
		t.Errorf("a LAT_PLAIN record decodes to %+v (stall %+v), want the totals before and no stall", got, got.Stall)
	}
}
