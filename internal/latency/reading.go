package latency

// Reading is what a source reports: one request, a batch of them, or the
// statistics of a whole window (a scraped histogram already summarises one).
type Reading struct {
	Sample  Sample
	Samples []Sample // set for a batch, in place of Sample
	Window  *Stats   // set for a whole window's statistics
}
