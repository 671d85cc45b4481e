package psi

// Dur is dur, for the test that holds it to output.Dur.
var Dur = dur
