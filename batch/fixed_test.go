package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

var fixedSeeds = append([]string{
	"774.62", "0.01", "999.99", "-12.5", "+3.25", "12345678", "1234567.8", "123456.78",
	"1.500", "1.505", "1.5e2", "1e-2", "0.001", "-0.00", "00012.50", " 7.25", "7.25 ", "\t5",
	"4503599627370495", "45035996273704.95", "45035996273704.96", "9e15", "1,5", "1.2\r",
}, floatSeeds...)

// checkFixed asserts that the word parser and the fused scanner agree with the definition:
// parseValue (the float64 the float path sees), then toFixed.
func checkFixed(t *testing.T, s string, fx *fixedSpec) {
	t.Helper()
	v, verr := parseValue([]byte(s))
	wantM, wantOK := int64(0), false
	if verr == nil {
		wantM, wantOK = fx.toFixed(v)
	}
	for _, pad := range []string{"\n", "\n0123456789", "\r\n0123456789"} {
		buf := []byte(s + pad)
		m, ok, err := fx.parseFixed(buf, 0, len(s))
		if ok != wantOK || (ok && m != wantM) || (err != nil) != (verr != nil) {
			t.Fatalf("F=%d parseFixed(%q) = %d, %v, %v; want %d, %v, %v", fx.scale, s, m, ok, err, wantM, wantOK, verr)
		}
		if strings.ContainsAny(s, ",\r\n\"") {
			continue
		}
		// The same field as the last column of a row, through both scanners.
		row := []byte("1764489600000," + s + pad)
		for _, scan := range []func([]byte, int, int, *fixedSpec, []int64) (int, int, bool){scanRowsFixed, scanRowsFixedAny} {
			out := make([]int64, 1)
			n, p, nf := scan(row, 1, 2, fx, out)
			switch {
			case wantOK && (n != 1 || out[0] != wantM || row[p-1] != '\n'):
				t.Fatalf("F=%d scan %q: n=%d p=%d m=%d, want %d", fx.scale, row, n, p, out[0], wantM)
			case !wantOK && (n != 0 || p != 0 || nf != (verr == nil)):
				t.Fatalf("F=%d scan %q: n=%d p=%d notFixed=%v, want none (parse error %v)", fx.scale, row, n, p, nf, verr)
			}
		}
	}
}

func TestParseFixedMatchesDefinition(t *testing.T) {
	for f := minFixedScale; f <= maxFixedScale; f++ {
		fx := newFixedSpec([]byte("1."+strings.Repeat("0", f)), 1000)
		if fx.scale != f {
			t.Fatalf("scale %d, want %d", fx.scale, f)
		}
		for _, s := range fixedSeeds {
			checkFixed(t, s, &fx)
		}
	}
	fx := newFixedSpec([]byte("774.62"), 1000)
	for c := -100_000; c < 100_000; c += 7 {
		s := strconv.FormatFloat(float64(c)/100, 'f', 2, 64)
		checkFixed(t, s, &fx)
		if m, ok, _ := fx.parseFixed([]byte(s+"\n......."), 0, len(s)); !ok || m != int64(c) {
			t.Fatalf("%q: %d, %v; want %d", s, m, ok, c)
		}
	}
	// A window of a million values must not overflow: the limit shrinks with k.
	big := newFixedSpec([]byte("1.00"), 1_000_000)
	if big.lim > math.MaxInt64/1_000_000 {
		t.Fatalf("limit %d too large for k = 1e6", big.lim)
	}
	checkFixed(t, "99999999.99", &big)
}

func FuzzParseFixed(f *testing.F) {
	for _, s := range fixedSeeds {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, scale uint8) {
		fx := newFixedSpec([]byte("0."+strings.Repeat("1", int(scale%8))), 1+int(scale))
		checkFixed(t, s, &fx)
	})
}

func TestFixedFloatRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for f := minFixedScale; f <= maxFixedScale; f++ {
		fx := newFixedSpec([]byte("1."+strings.Repeat("5", f)), 1000)
		for i := 0; i < 20_000; i++ {
			m := rng.Int64N(2*fx.lim+1) - fx.lim
			if i%2 == 0 {
				m = rng.Int64N(2_000_001) - 1_000_000
			}
			v := fx.toFloat(m)
			// toFloat is the decimal m·10^-F correctly rounded, as strconv parses it.
			want, err := strconv.ParseFloat(strconv.FormatInt(m, 10)+"e-"+strconv.Itoa(f), 64)
			if err != nil || v != want {
				t.Fatalf("F=%d toFloat(%d) = %v, strconv %v", f, m, v, want)
			}
			if back, ok := fx.toFixed(v); !ok || back != m {
				t.Fatalf("F=%d toFixed(toFloat(%d)) = %d, %v", f, m, back, ok)
			}
		}
		// Sums beyond 2^53 take the strconv path and stay correctly rounded.
		s := int64(1)<<60 + 12345
		want, _ := strconv.ParseFloat(strconv.FormatInt(s, 10)+"e-"+strconv.Itoa(f), 64)
		if got := fx.toFloat(s); got != want {
			t.Fatalf("F=%d toFloat(%d) = %v, want %v", f, s, got, want)
		}
	}
}

// centsRows returns n cents values (negatives too) and the CSV and NDJSON texts of them.
func centsRows(rng *rand.Rand, n int) ([]int64, string, string) {
	cents := make([]int64, n)
	var c, j strings.Builder
	c.WriteString("ts,amount\n")
	for i := range cents {
		cents[i] = rng.Int64N(200_000) - 50_000
		s := strconv.FormatFloat(float64(cents[i])/100, 'f', 2, 64)
		fmt.Fprintf(&c, "%d,%s\n", 1764489600000+int64(i), s)
		fmt.Fprintf(&j, "{\"ts\":%d,\"amount\":%s}\n", 1764489600000+int64(i), s)
	}
	return cents, c.String(), j.String()
}

// TestJobFixedSumIsExact: sum and avg of cents are the exact decimal sums, correctly rounded,
// in every reading mode and format, and the best window is the first with the largest (or
// smallest) exact sum.
func TestJobFixedSumIsExact(t *testing.T) { inModes(t, testJobFixedSumIsExact) }

func testJobFixedSumIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cents, csvText, ndjson := centsRows(rng, 3000)
	for _, k := range []int{1, 7, 1000} {
		for _, agg := range []string{AggSum, AggAvg} {
			for _, best := range []string{BestMax, BestMin} {
				var want []string
				var s, bestS int64
				bestEnd := -1
				for i, c := range cents {
					s += c
					if i >= k {
						s -= cents[i-k]
					}
					if i < k-1 {
						continue
					}
					v, _ := strconv.ParseFloat(strconv.FormatInt(s, 10)+"e-2", 64)
					if agg == AggAvg {
						v /= float64(k)
					}
					want = append(want, string(appendNumber(nil, v)))
					if bestEnd < 0 || (best == BestMax && s > bestS) || (best == BestMin && s < bestS) {
						bestS, bestEnd = s, i
					}
				}
				for format, in := range map[string]string{"csv": csvText, "ndjson": ndjson} {
					name := fmt.Sprintf("k=%d/%s/%s/%s", k, agg, best, format)
					j := Job{Size: k, Agg: agg, Best: best, Column: "amount"}
					res, series, err := runJob(t, j, in)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if strings.Join(series, "\n") != strings.Join(want, "\n") {
						for i := range want {
							if i >= len(series) || series[i] != want[i] {
								t.Fatalf("%s: window %d = %q, want %q", name, i, series[min(i, len(series)-1)], want[i])
							}
						}
						t.Fatalf("%s: %d series lines, want %d", name, len(series), len(want))
					}
					if res.End != int64(bestEnd) || string(appendNumber(nil, res.Best)) != want[bestEnd-k+1] {
						t.Fatalf("%s: best %v at %d, want %s at %d", name, res.Best, res.End, want[bestEnd-k+1], bestEnd)
					}
					// Without the series the hot loop runs; it must find the same window.
					res2, err := j.Run(context.Background(), strings.NewReader(in), nil)
					if err != nil || res2 != res {
						t.Fatalf("%s: without series %+v, %v; with %+v", name, res2, err, res)
					}
				}
			}
		}
	}
}

// TestJobFixedSwitchesToFloat: a value with no fixed-point form switches the job to the
// float64 sum at that very row, so every mode and format prints the same bits.
func TestJobFixedSwitchesToFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	cents, _, _ := centsRows(rng, 2000)
	vals := make([]string, len(cents))
	for i, c := range cents {
		vals[i] = strconv.FormatFloat(float64(c)/100, 'f', 2, 64)
	}
	vals[1234] = "0.001" // three decimals with F = 2
	vals[1500] = "1e3"   // an exponent that has a fixed-point form: no switch by itself
	var c, j strings.Builder
	c.WriteString("amount\n")
	for _, v := range vals {
		fmt.Fprintf(&c, "%s\n", v)
		fmt.Fprintf(&j, "{\"amount\":%s}\n", v)
	}
	type out struct {
		res    Result
		series string
	}
	var ref *out
	check := func(name string, res Result, series []string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := &out{res, strings.Join(series, "\n")}
		if ref == nil {
			ref = got
			return
		}
		if *got != *ref {
			t.Fatalf("%s: %+v differs from the first mode's %+v", name, got.res, ref.res)
		}
	}
	job := Job{Size: 100, Agg: AggSum}
	inModes(t, func(t *testing.T) {
		res, series, err := runJob(t, job, c.String())
		check("csv", res, series, err)
		res, series, err = runJob(t, job, j.String())
		check("ndjson", res, series, err)
	})
	// Windows that end before the switch are exact decimal sums.
	var s int64
	for i := 0; i < 1234; i++ {
		s += cents[i]
		if i >= 100 {
			s -= cents[i-100]
		}
		if i >= 99 {
			want, _ := strconv.ParseFloat(strconv.FormatInt(s, 10)+"e-2", 64)
			if got := strings.Split(ref.series, "\n")[i-99]; got != string(appendNumber(nil, want)) {
				t.Fatalf("window ending at row %d: %s, want %v", i, got, want)
			}
		}
	}
}

// TestRunMappedFile: Run over a regular file (mapped) gives what Run over a stream of the
// same bytes gives, results, series and errors alike.
func TestRunMappedFile(t *testing.T) {
	dir := t.TempDir()
	_, cents, _ := centsRows(rand.New(rand.NewPCG(1, 1)), 5000)
	inputs := map[string]string{
		"cents":      cents,
		"no newline": strings.TrimSuffix(cents, "\n"),
		"crlf":       strings.ReplaceAll(cents, "\n", "\r\n"),
		"quotes":     strings.Replace(cents, "\n1764489600100,", "\n\"1764489600100\",", 1),
		"blank":      strings.Replace(cents, "\n1764489600100,", "\n\n1764489600100,", 1),
		"bad row":    strings.Replace(cents, "\n1764489600100,", "\n1764489600100,x", 1),
		"ndjson":     "{\"amount\":1.5}\n{\"amount\":2}\n{\"amount\":3.25}\n",
		"article":    articleCSV(3000),
	}
	defer func(size int) { chunkSize = size }(chunkSize)
	chunkSize = 4096
	for name, in := range inputs {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, j := range []Job{{Size: 3}, {Size: 1000, Agg: AggAvg, Best: BestMin}, {Size: 2, Agg: AggMax}} {
			want, wantSeries, wantErr := runJob(t, j, in)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			var series bytes.Buffer
			got, gotErr := j.Run(context.Background(), f, &series)
			f.Close()
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || fmt.Sprint(got) != fmt.Sprint(want) ||
				strings.TrimSuffix(series.String(), "\n") != strings.Join(wantSeries, "\n") {
				t.Fatalf("%s %+v: file %+v, %v; stream %+v, %v", name, j, got, gotErr, want, wantErr)
			}
		}
	}
}

// TestMappedFileShrinks: reading a mapped page past the end of a truncated file is an error
// wrapping ErrInputChanged, not a crash.
func TestMappedFileShrinks(t *testing.T) {
	path, data := mapTemp(t, bytes.Repeat([]byte("1,2\n"), 4096))
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	err := func() (err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if e := recover(); e != nil {
				err = faultError(e)
			}
		}()
		sink = data[8192]
		return nil
	}()
	if !errors.Is(err, ErrInputChanged) {
		t.Fatalf("got %v, want ErrInputChanged", err)
	}
}

var sink byte

// TestFixedPathAllocatesNothingPerRow: readFixed (sequential) and the fixed-point sum.
func TestFixedPathAllocatesNothingPerRow(t *testing.T) {
	defer func(seq bool) { sequentialOnly = seq }(sequentialOnly)
	sequentialOnly = true
	_, in, _ := centsRows(rand.New(rand.NewPCG(2, 2)), 50_000)
	rd, err := NewCSVReader(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixedSpec(rd.FirstRow()[1], 100)
	rd.fixed = &fx
	if err := rd.Select("amount", ""); err != nil {
		t.Fatal(err)
	}
	dst := make([]int64, 100)
	fs := newFixedSum(&fx, 100, true, false)
	var row int64
	allocs := testing.AllocsPerRun(100, func() {
		n, more := rd.readFixed(dst)
		if n != len(dst) || !more {
			t.Fatalf("readFixed: %d, %v", n, more)
		}
		if err := fs.consume(dst[:n], row, nil, nil); err != nil {
			t.Fatal(err)
		}
		row += int64(n)
	})
	if allocs != 0 {
		t.Fatalf("100 rows: %v allocs", allocs)
	}
}

// FuzzJobFixedModes: a count sum job prints the same result, series and error whether the CSV
// is read sequentially or cut into tiny parallel chunks (fixed point, its fallbacks and the
// switch to float64 included), and never panics.
func FuzzJobFixedModes(f *testing.F) {
	for _, s := range []string{
		"ts,amount\n1,10.25\n2,20.5\n3,0.001\n4,1e3\n5,-7\n",
		"amount\n1.5\n\n2.25\n\"3\"\n4\r\n5",
		"a,amount\n1, 2.50\n1,2.5 \n1,x\n",
		"amount\n99999999.99\n0.01\n-0\n+1\n.5\n5.\n",
	} {
		f.Add(s, uint8(2))
	}
	defer func(seq bool, size int) { sequentialOnly, chunkSize = seq, size }(sequentialOnly, chunkSize)
	f.Fuzz(func(t *testing.T, in string, k uint8) {
		j := Job{Size: 1 + int(k%5), Column: "amount", Format: FormatCSV}
		run := func(seq bool, size int) string {
			sequentialOnly, chunkSize = seq, size
			res, series, err := runJob(t, j, in)
			return fmt.Sprint(res, series, err)
		}
		if a, b := run(true, 1<<20), run(false, 16); a != b {
			t.Fatalf("sequential %s\nchunks     %s", a, b)
		}
	})
}

// mapTemp writes data to a file of the test's and maps it (mapFile), until the test ends.
func mapTemp(t *testing.T, data []byte) (path string, mapped []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "mapped")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mapped, unmap, ok := mapFile(f)
	if !ok {
		t.Fatal("mapFile refused a regular file")
	}
	t.Cleanup(unmap)
	return path, mapped
}
