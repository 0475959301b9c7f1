package main

import "testing"

// Sub-millisecond values keep three significant digits, in µs; the rest read as
// they always did.
func TestMsFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0.00 ms"}, {-3.5, "-3.50 ms"}, {1, "1.00 ms"}, {9.87, "9.87 ms"}, {249.4, "249 ms"}, {12345, "12.3 s"},
		{0.7, "700 µs"}, {0.2034, "203 µs"}, {0.05, "50.0 µs"}, {0.0543, "54.3 µs"}, {0.0049, "4.90 µs"}, {0.0005, "0.50 µs"},
		{0.9996, "1.00 ms"}, {0.09996, "100 µs"}, {0.009996, "10.0 µs"},
	} {
		if got := ms(c.v); got != c.want {
			t.Errorf("ms(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
