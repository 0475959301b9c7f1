package nfqdelay

// RaiseThreadPriority lets the external tests put their own thread beside
// the scheduler's.
var RaiseThreadPriority = raiseThreadPriority
