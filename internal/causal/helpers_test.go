package causal

import (
	"fmt"
	"strconv"
)

func fmtSscan(s string, v *float64) (int, error) { return fmt.Sscan(s, v) }
func ftoa(f float64) string                      { return strconv.FormatFloat(f, 'f', -1, 64) }
func itoa(i int) string                          { return strconv.Itoa(i) }
func ms(ns int64) string                         { return strconv.FormatInt(ns/1e6, 10) }
