package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// articleCSV is the article's orders as testdata/gen writes them (ts column simplified).
func articleCSV(n int) string {
	var b strings.Builder
	b.WriteString("ts,amount\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d,%d\n", 1764489600000+int64(i)*600, (i*7919)%1000+1)
	}
	return b.String()
}

func runJob(t testing.TB, j Job, in string) (Result, []string, error) {
	t.Helper()
	var series bytes.Buffer
	res, err := j.Run(context.Background(), strings.NewReader(in), &series)
	lines := strings.Split(strings.TrimSuffix(series.String(), "\n"), "\n")
	if series.Len() == 0 {
		lines = nil
	}
	return res, lines, err
}

func TestArticleBestWindowJSON(t *testing.T) {
	res, series, err := runJob(t, Job{Size: 1000}, articleCSV(100_000))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	const want = `{"agg":"sum","size":1000,"n":100000,"best":500500,"start":0,"end":999}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if len(series) != 100_000-1000+1 || series[0] != "500500" || series[len(series)-1] != "500500" {
		t.Fatalf("series: %d lines, first %q", len(series), series[0])
	}
}

// row is one generated input row.
type row struct {
	ts int64
	v  float64
}

func toCSV(rows []row) string {
	var b strings.Builder
	b.WriteString("id,ts,amount\n")
	for i, r := range rows {
		fmt.Fprintf(&b, "x%d,%d,%s\n", i, r.ts, strconv.FormatFloat(r.v, 'f', -1, 64))
	}
	return b.String()
}

func toNDJSON(rows []row) string {
	var b strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&b, `{"id":"x%d","ts":"%s","amount":%s}`+"\n", i,
			time.UnixMilli(r.ts).UTC().Format(time.RFC3339Nano), strconv.FormatFloat(r.v, 'f', -1, 64))
	}
	return b.String()
}

// oracle computes every window naively: the value, its first row, for rows that end one. For
// quantiles, alts holds the upper neighbour of the rank (q·(n−1) falls between two values and
// DDSketch's rank semantics pick either side depending on the sign); otherwise alts == vals.
func oracle(rows []row, j Job) (vals, alts []float64, starts []int) {
	for end := range rows {
		var win []float64
		first := end
		if j.Size > 0 {
			if end < j.Size-1 {
				continue
			}
			first = end - j.Size + 1
		} else {
			for first > 0 && rows[first-1].ts > rows[end].ts-j.Span.Milliseconds() {
				first--
			}
		}
		for _, r := range rows[first : end+1] {
			win = append(win, r.v)
		}
		var w float64
		alt := math.NaN()
		switch j.Agg {
		case AggSum, AggAvg:
			for _, x := range win {
				w += x
			}
			if j.Agg == AggAvg {
				w /= float64(len(win))
			}
		case AggCount:
			w = float64(len(win))
		case AggRate:
			w = float64(len(win)) / j.Span.Seconds()
		case AggMax:
			w = slices.Max(win)
		case AggMin:
			w = slices.Min(win)
		default:
			st, _ := window.ParseStat(j.Agg)
			slices.Sort(win)
			rank := st.Q * float64(len(win)-1)
			w, alt = win[int(math.Floor(rank))], win[int(math.Ceil(rank))]
		}
		if math.IsNaN(alt) {
			alt = w
		}
		vals = append(vals, w)
		alts = append(alts, alt)
		starts = append(starts, first)
	}
	return vals, alts, starts
}

func genRows(rng *rand.Rand, n int) []row {
	rows := make([]row, n)
	ts := int64(1764489600000)
	for i := range rows {
		ts += int64(rng.IntN(3) * 500) // repeats and gaps
		rows[i] = row{ts, float64(rng.IntN(2000)-500) / 4}
	}
	return rows
}

// TestJobMatchesOracle runs every aggregate over count and time windows, CSV and NDJSON, best
// max and min, and compares the series, the best value and its rows with a naive oracle.
func TestJobMatchesOracle(t *testing.T) { inModes(t, testJobMatchesOracle) }

func testJobMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	rows := genRows(rng, 600)
	inputs := map[string]string{"csv": toCSV(rows), "ndjson": toNDJSON(rows)}
	for _, agg := range []string{AggSum, AggAvg, AggCount, AggMax, AggMin, AggP50, AggP95, AggP99, "p90", "p99.9", "0.75", "p0", "p100", AggRate} {
		for _, win := range []Job{{Size: 1}, {Size: 7}, {Size: 600}, {Span: 500 * time.Millisecond}, {Span: 4 * time.Second}} {
			if agg == AggRate && win.Size > 0 {
				continue // a count window has no rate (TestValidate)
			}
			for _, best := range []string{BestMax, BestMin} {
				for format, in := range inputs {
					j := win
					j.Agg, j.Best, j.Column = agg, best, "amount"
					name := fmt.Sprintf("%s/size=%d/span=%v/%s/%s", agg, j.Size, j.Span, best, format)
					res, series, err := runJob(t, j, in)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					want, alts, starts := oracle(rows, j)
					if len(series) != len(want) {
						t.Fatalf("%s: %d series lines, want %d", name, len(series), len(want))
					}
					tol := 1e-9
					if st, _ := window.ParseStat(agg); st.Kind == window.StatQuantile && st.Q > 0 && st.Q < 1 {
						tol = 0.0101 // DDSketch 1% plus rounding; p0 and p100 are the exact min and max
					}
					for i, s := range series {
						got, _ := strconv.ParseFloat(s, 64)
						near := func(w float64) bool { return math.Abs(got-w) <= tol*math.Abs(w)+1e-12 }
						if !near(want[i]) && !near(alts[i]) {
							t.Fatalf("%s: window %d = %v, want %v", name, i, got, want[i])
						}
					}
					// The best is the first extreme of the series the job printed.
					bi := 0
					for i, s := range series {
						v, _ := strconv.ParseFloat(s, 64)
						b, _ := strconv.ParseFloat(series[bi], 64)
						if (best == BestMax && v > b) || (best == BestMin && v < b) {
							bi = i
						}
					}
					end := bi
					if j.Size > 0 {
						end = bi + j.Size - 1
					}
					if res.End != int64(end) || res.Start != int64(starts[bi]) || strconv.FormatFloat(res.Best, 'f', -1, 64) != series[bi] {
						t.Fatalf("%s: best %v rows %d–%d, want %s rows %d–%d", name, res.Best, res.Start, res.End, series[bi], starts[bi], end)
					}
					if j.Span > 0 && (res.StartTS != rows[res.Start].ts || res.EndTS != rows[res.End].ts) {
						t.Fatalf("%s: start_ts %d end_ts %d, want %d %d", name, res.StartTS, res.EndTS, rows[res.Start].ts, rows[res.End].ts)
					}
					if res.N != int64(len(rows)) {
						t.Fatalf("%s: n = %d", name, res.N)
					}
				}
			}
		}
	}
}

func TestTimeWindowJSONAndEdge(t *testing.T) {
	// The article's WindowCounter instants as rows: (now − 60 s, now] counts 1 2 3 4 4 3.
	in := "ts,amount\n0,1\n10000,1\n30000,1\n59999,1\n60000,1\n90001,1\n"
	res, series, err := runJob(t, Job{Span: time.Minute, Agg: AggCount}, in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(series, " ") != "1 2 3 4 4 3" {
		t.Fatalf("series %v", series)
	}
	b, _ := json.Marshal(res)
	const want = `{"agg":"count","span_ms":60000,"n":6,"best":4,"start":0,"end":3,"start_ts":0,"end_ts":59999}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestJobColumnChoice(t *testing.T) { inModes(t, testJobColumnChoice) }

func testJobColumnChoice(t *testing.T) {
	cases := []struct {
		j    Job
		in   string
		best float64
		err  string
	}{
		{Job{Size: 2}, "ts,amount\n1,5\n2,6\n", 11, ""},
		{Job{Size: 2}, "name,amount,note\na,5,x\nb,6,y\n", 11, ""},
		{Job{Size: 2}, "id,amount\n1,5\n2,6\n", 0, "cannot choose the value column: several numeric columns (id, amount); choose one"},
		{Job{Size: 2, Column: "id"}, "id,amount\n1,5\n2,6\n", 3, ""},
		{Job{Size: 2}, "name,note\na,x\n", 0, "cannot choose the value column: no numeric column in the first row (columns: name, note); set the column"},
		{Job{Size: 2}, "ts,amount\n", 0, "cannot choose the value column: no data row to look at (columns: ts, amount); set the column"},
		{Job{Size: 2, Column: "price"}, "ts,amount\n1,2\n", 0, `missing column "price" (columns: ts, amount)`},
		{Job{Span: time.Second, TimeColumn: "when"}, "ts,amount\n1,2\n", 0, `missing column "when" (columns: ts, amount)`},
		{Job{Size: 3}, "ts,amount\n1,5\n2,6\n", 0, "fewer rows than the window size: 2 rows, window size 3"},
		{Job{Size: 2, Column: "amount"}, "ts,amount\n", 0, "no data rows"},
		{Job{Span: time.Second}, "ts,amount\n1000,1\n2000,2\n1999,3\n", 0,
			`row 2, column "ts": timestamp earlier than the previous row's (time windows need rows sorted by time; slide does not reorder them): "1999 < 2000"`},
		{Job{Size: 1}, "amount\n1e308\n1e308\n", 1e308, ""},
		{Job{Size: 2}, "amount\n1e308\n1e308\n", 0, `row 1, column "amount": window value overflows float64`},
	}
	for _, c := range cases {
		res, _, err := runJob(t, c.j, c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%+v on %q: %v", c.j, c.in, err)
		case c.err == "" && res.Best != c.best:
			t.Errorf("%+v on %q: best %v, want %v", c.j, c.in, res.Best, c.best)
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%+v on %q: err %v\nwant %s", c.j, c.in, err, c.err)
		}
	}
}

func TestJobValidate(t *testing.T) {
	for _, j := range []Job{
		{}, {Size: -1}, {Span: -time.Second}, {Size: 1, Span: time.Second}, {Span: 1500 * time.Microsecond},
		{Size: 1, Agg: "median"}, {Size: 1, Best: "first"}, {Size: 1, Format: "xml"},
	} {
		if err := j.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", j, err)
		}
		if _, err := j.Run(context.Background(), strings.NewReader("a\n1\n"), nil); !errors.Is(err, ErrConfig) {
			t.Errorf("Run(%+v) = %v, want ErrConfig", j, err)
		}
	}
	if err := (Job{Size: 5, Agg: AggP95}).Validate(); err != nil {
		t.Errorf("valid job: %v", err)
	}
	for _, c := range []struct {
		j   Job
		msg string
	}{
		{Job{Size: 5, Agg: "median"}, `agg "median": want count, sum, avg, min, max, rate or a percentile such as p95, p99.9 or 0.75`},
		{Job{Size: 5, Agg: AggRate}, `agg "rate": needs a time window (span): a count window has no length in time`},
		{Job{Size: 5, Aggs: []string{"p95", "0.95"}}, `agg "0.95" listed twice`},
		{Job{Size: 5, Aggs: []string{"sum", " SUM"}}, `agg " SUM" listed twice`},
	} {
		if err := c.j.Validate(); !errors.Is(err, ErrConfig) || !strings.HasSuffix(err.Error(), c.msg) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig ending %q", c.j, err, c.msg)
		}
	}
}

// TestAggregatesByWindowStat: a job takes every statistic window.ParseStat reads and names
// each by its one name, in Result.Agg and Aggregates alike; rate is rows per second of the
// span, and needs no value column.
func TestAggregatesByWindowStat(t *testing.T) {
	j := Job{Span: 2 * time.Second, Aggs: []string{"0.75", " P99.9", "rate", "p100"}}
	if got, want := strings.Join(j.Aggregates(), ","), "p75,p99.9,rate,p100"; got != want {
		t.Fatalf("Aggregates = %s, want %s", got, want)
	}
	if got := (Job{}).Aggregates(); len(got) != 1 || got[0] != AggSum {
		t.Errorf("default Aggregates = %v", got)
	}
	in := "ts,amount\n1000,1\n1500,4\n2000,2\n2500,8\n4000,3\n"
	rep, err := j.RunAll(context.Background(), strings.NewReader(in), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range rep.Results {
		got[r.Agg] = r.Best
	}
	// (ts − 2s, ts] holds at most 4 rows (1000…2500 ending at 2500): 2 rows per second; the
	// max is 8, exact for p100.
	if len(got) != 4 || got["rate"] != 2 || got["p100"] != 8 || got["p75"] == 0 || got["p99.9"] == 0 {
		t.Errorf("results %v", got)
	}
	count := Job{Span: 2 * time.Second, Agg: "rate"}
	rep, err = count.RunAll(context.Background(), strings.NewReader("ts,a,b\n1000,x,y\n1200,x,y\n"), "", nil)
	if err != nil || len(rep.Results) != 1 || rep.Results[0].Best != 1 {
		t.Errorf("rate without a value column: %+v, %v", rep, err)
	}
}

func TestJobCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Job{Size: 10}.Run(ctx, strings.NewReader(articleCSV(100)), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestFormatDetection(t *testing.T) {
	for _, in := range []string{"\n\n {\"amount\":4}\n{\"amount\":6}\n", "\xef\xbb\xbf{\"amount\":4}\n{\"amount\":6}\n", "amount\n4\n6\n"} {
		res, _, err := runJob(t, Job{Size: 2}, in)
		if err != nil || res.Best != 10 {
			t.Errorf("%q: %v, %v", in, res.Best, err)
		}
	}
}

// TestSumWindowExactOverLongRun: 200k cents values through the job; the best sum must equal a
// fresh decimal sum of its window to the cent.
func TestJobSumIsExactToTheCent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteString("amount\n")
	cents := make([]int64, 200_000)
	for i := range cents {
		cents[i] = int64(rng.IntN(99_999) + 1)
		fmt.Fprintf(&b, "%d.%02d\n", cents[i]/100, cents[i]%100)
	}
	res, _, err := runJob(t, Job{Size: 1000}, b.String())
	if err != nil {
		t.Fatal(err)
	}
	var exact int64
	for _, c := range cents[res.Start : res.End+1] {
		exact += c
	}
	if math.Abs(res.Best*100-float64(exact)) > 1e-6 {
		t.Fatalf("best %v, exact %d cents", res.Best, exact)
	}
}
