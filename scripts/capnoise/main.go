// Command capnoise reads the raw series a capacity run leaves in
// TIERSCOPE_CAPACITY_DUMP (e2e/capacity_long_test.go) and reports the noise
// the quota wave competed with: the client's bin means about their quota's
// level, their averaged periodogram against white noise, how much of them
// the arrivals per bin explain, and how fast the response follows a change
// of quota (the step response folded over every cut and every grant).
//
//	go run ./scripts/capnoise /tmp/capdump21
//	go run ./scripts/capnoise -bin 0.671 -n 128 /tmp/capdump21
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"math/cmplx"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"

	"github.com/tierscope/tierscope/internal/spectral"
)

func main() {
	bin := flag.Float64("bin", 0.67, "bin width in seconds (the plan's)")
	n := flag.Int("n", 128, "bins per periodogram segment (a power of two)")
	flag.Parse()
	if flag.NArg() != 1 || !spectral.IsPowerOfTwo(*n) || !(*bin > 0) {
		fmt.Fprintln(os.Stderr, "usage: capnoise [-bin seconds] [-n power of two] DUMP_DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "capnoise:", err)
		os.Exit(1)
	}
}

// readPairs reads "a,b" lines of numbers.
func readPairs(path string) ([][2]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]float64
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		a, b, ok := strings.Cut(sc.Text(), ",")
		x, errA := strconv.ParseFloat(a, 64)
		y, errB := strconv.ParseFloat(b, 64)
		if !ok || errA != nil || errB != nil {
			return nil, fmt.Errorf("%s:%d: want two numbers separated by a comma, got %q", path, line, sc.Text())
		}
		out = append(out, [2]float64{x, y})
	}
	return out, sc.Err()
}

func run(dir string, width float64, n int) error {
	reqs, err := readPairs(filepath.Join(dir, "requests.csv"))
	if err != nil {
		return err
	}
	// The client logs requests as they complete, not quite in time order.
	sort.Slice(reqs, func(i, j int) bool { return reqs[i][0] < reqs[j][0] })
	quota, err := readPairs(filepath.Join(dir, "quota.csv"))
	if err != nil {
		return err
	}
	if len(quota) < 2 {
		return fmt.Errorf("%s: fewer than two quota records", filepath.Join(dir, "quota.csv"))
	}
	quotaAt := func(t float64) float64 {
		i := sort.Search(len(quota), func(i int) bool { return quota[i][0] > t }) - 1
		return quota[max(i, 0)][1]
	}
	// The experiment's span: from its first quota record to its last change.
	start, end := quota[0][0], quota[len(quota)-1][0]
	bins := int((end - start) / width)
	sum, count := make([]float64, bins), make([]float64, bins)
	level := map[float64][2]float64{} // quota → (requests, sum of ms)
	for _, r := range reqs {
		i := int(math.Floor((r[0] - start) / width))
		if i < 0 || i >= bins {
			continue
		}
		sum[i] += r[1]
		count[i]++
		q := quotaAt(r[0])
		l := level[q]
		level[q] = [2]float64{l[0] + 1, l[1] + r[1]}
	}
	// Each bin's mean about its quota's level, with its arrivals and the
	// previous bin's.
	var resid, arrivals, before []float64
	for i := 1; i < bins; i++ {
		if count[i] == 0 {
			continue
		}
		l := level[quotaAt(start+(float64(i)+0.5)*width)]
		resid = append(resid, sum[i]/count[i]-l[1]/l[0])
		arrivals, before = append(arrivals, count[i]), append(before, count[i-1])
	}
	if len(resid) < n {
		return fmt.Errorf("%d bins, fewer than one segment of %d", len(resid), n)
	}
	variance := 0.0
	for _, v := range resid {
		variance += v * v
	}
	variance /= float64(len(resid))
	binned := 0.0
	for _, c := range count {
		binned += c
	}
	fmt.Printf("%d bins of %.3f s, %.1f requests each; σ of the bin means about their quota's level: %.2f ms\n",
		len(resid), width, binned/float64(bins), math.Sqrt(variance))

	// Averaged periodogram over whole segments, over N·σ² (1 for white noise).
	power := make([]float64, n/2)
	segments := 0
	for s := 0; s+n <= len(resid); s += n {
		seg := make([]float64, n)
		mean := 0.0
		for j, v := range resid[s : s+n] {
			seg[j], mean = v, mean+v/float64(n)
		}
		for j := range seg {
			seg[j] -= mean
		}
		spec, err := spectral.Spectrum(seg)
		if err != nil {
			return err
		}
		for k := 1; k < n/2; k++ {
			// Spectrum divides by N: |Σ|²/(N·σ²) = N·|X_k|²/σ².
			power[k] += float64(n) * math.Pow(cmplx.Abs(spec[k]), 2) / variance
		}
		segments++
	}
	high := 0.0
	for k := 17; k < n/2; k++ {
		high += power[k] / float64(segments) / float64(n/2-17)
	}
	fmt.Printf("periodogram over %d segments of %d bins, |X(k)|²/(N·σ²), white = 1; mean over k 17–%d: %.2f\n", segments, n, n/2-1, high)
	for k := 1; k <= 16; k++ {
		fmt.Printf("  k %2d: %.2f\n", k, power[k]/float64(segments))
	}

	r2 := rSquared(resid, arrivals, before)
	fmt.Printf("arrivals in the bin and the one before explain R² %.3f of the bin means: as a covariate, a standard error × %.3f\n", r2, math.Sqrt(1-r2))

	stepResponse(reqs, quota, "cut", func(from, to float64) bool { return from == quota[0][1] && to < from })
	stepResponse(reqs, quota, "grant", func(from, to float64) bool { return from == quota[0][1] && to > from })
	return nil
}

// stepResponse folds the client's response times over every quota change
// that picks selects and prints the profile (see foldSteps).
func stepResponse(reqs, quota [][2]float64, name string, picks func(from, to float64) bool) {
	f := foldSteps(reqs, quota, picks)
	if f.changes == 0 {
		return
	}
	fmt.Printf("step response to a %s (%d of %d changes lasting %.1f s), mean client ms by sixths of it from one length before:\n ", name, f.folded, f.changes, f.length)
	for b, v := range f.profile {
		if b == 6 || b == 12 {
			fmt.Print(" |")
		}
		fmt.Printf(" %.1f", v)
	}
	fmt.Println()
}

// sixths is how many sixths of a change's length a step response spans:
// one length before the change and two after it.
const sixths = 18

// folded is a step response: the mean response in sixths of the typical
// change's length (NaN where no request fell).
type folded struct {
	changes, folded int
	length          float64
	profile         [sixths]float64
}

// foldSteps folds reqs (sorted by time) over the quota changes that picks
// selects, keeping those that last the typical (median) time L to within
// 0.5 s. A queue that lags the quota shows as a first sixth short of the
// rest.
func foldSteps(reqs, quota [][2]float64, picks func(from, to float64) bool) folded {
	var out folded
	var starts, lengths []float64
	for i := 1; i+1 < len(quota); i++ {
		if picks(quota[i-1][1], quota[i][1]) {
			starts, lengths = append(starts, quota[i][0]), append(lengths, quota[i+1][0]-quota[i][0])
		}
	}
	out.changes = len(starts)
	if out.changes == 0 {
		return out
	}
	sorted := append([]float64(nil), lengths...)
	sort.Float64s(sorted)
	out.length = stat.Quantile(0.5, stat.Empirical, sorted, nil)
	step := out.length / 6
	var sum, count [sixths]float64
	for i, t0 := range starts {
		if math.Abs(lengths[i]-out.length) > 0.5 {
			continue
		}
		out.folded++
		from := t0 - out.length
		j := sort.Search(len(reqs), func(j int) bool { return reqs[j][0] >= from })
		for ; j < len(reqs) && reqs[j][0] < t0+2*out.length; j++ {
			b := min(int((reqs[j][0]-from)/step), sixths-1)
			sum[b] += reqs[j][1]
			count[b]++
		}
	}
	for b := range out.profile {
		out.profile[b] = sum[b] / count[b] // NaN when empty
	}
	return out
}

// rSquared is the share of y's variance a least-squares fit on x1 and x2
// (with an intercept) explains.
func rSquared(y, x1, x2 []float64) float64 {
	center := func(v []float64) []float64 {
		m := 0.0
		for _, x := range v {
			m += x / float64(len(v))
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = x - m
		}
		return out
	}
	y, x1, x2 = center(y), center(x1), center(x2)
	var s11, s12, s22, s1y, s2y, syy float64
	for i := range y {
		s11, s12, s22 = s11+x1[i]*x1[i], s12+x1[i]*x2[i], s22+x2[i]*x2[i]
		s1y, s2y, syy = s1y+x1[i]*y[i], s2y+x2[i]*y[i], syy+y[i]*y[i]
	}
	det := s11*s22 - s12*s12
	if det == 0 || syy == 0 {
		return 0
	}
	b1, b2 := (s22*s1y-s12*s2y)/det, (s11*s2y-s12*s1y)/det
	return (b1*s1y + b2*s2y) / syy
}
