package benchenv

import (
	"fmt"
	"sort"
	"time"
)

// Median of ds (the mean of the middle two for an even count); 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Seconds formats d as seconds with two decimals.
func Seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// Pct is part as a percentage of whole (0 when whole is 0).
func Pct(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part.Seconds() / whole.Seconds()
}
