package batch

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// inModes runs f with the sequential reader, then with the parallel pipeline cutting the input
// into tiny chunks (so every test input spans many chunks, quotes and errors included).
func inModes(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer func(seq bool, size int) { sequentialOnly, chunkSize = seq, size }(sequentialOnly, chunkSize)
	t.Run("sequential", func(t *testing.T) { sequentialOnly = true; f(t) })
	for _, size := range []int{8, 64, 1 << 20} {
		t.Run(fmt.Sprintf("chunks=%d", size), func(t *testing.T) { sequentialOnly, chunkSize = false, size; f(t) })
	}
}

// readAll selects value (and time) and reads every row with small batches.
func readAll(t testing.TB, rd Reader, value, time string) ([]float64, []int64, error) {
	t.Helper()
	if c, ok := rd.(io.Closer); ok {
		defer c.Close()
	}
	if err := rd.Select(value, time); err != nil {
		return nil, nil, err
	}
	var vs []float64
	var ts []int64
	vals, tbuf := make([]float64, 3), make([]int64, 3)
	if time == "" {
		tbuf = nil
	}
	for {
		n, err := rd.Read(vals, tbuf)
		vs = append(vs, vals[:n]...)
		if tbuf != nil {
			ts = append(ts, tbuf[:n]...)
		}
		if err == io.EOF {
			return vs, ts, nil
		}
		if err != nil {
			return vs, ts, err
		}
	}
}

func TestCSVReaderShapes(t *testing.T) { inModes(t, testCSVReaderShapes) }

func testCSVReaderShapes(t *testing.T) {
	cases := []struct {
		name, in string
		want     []float64
	}{
		{"plain", "ts,amount\n1,10\n2,20.5\n", []float64{10, 20.5}},
		{"no final newline", "ts,amount\n1,10\n2,20", []float64{10, 20}},
		{"crlf", "ts,amount\r\n1,10\r\n2,20\r\n", []float64{10, 20}},
		{"bom and blank lines", "\xef\xbb\xbfts,amount\n\n1,10\n\r\n2,20\n\n", []float64{10, 20}},
		{"spaces", "ts, amount\n1, 10 \n2,\t20\n", []float64{10, 20}},
		{"quoted value", "ts,amount\n1,\"10\"\n2,\"2\"\"0\"\n3,30\n", nil},
		{"quoted other field", "name,amount\n\"a,b\",10\n\"say \"\"hi\"\"\",20\nplain,30\n", []float64{10, 20, 30}},
		{"quoted newline", "name,amount\n\"line1\nline2\",10\n\"x\r\ny\",20\nz,30\n", []float64{10, 20, 30}},
		{"quoted header", "\"ts\",\"amount\"\n1,5\n", []float64{5}},
		{"empty fields", "a,amount,b\n,1,\n,2,\n", []float64{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				var r io.Reader = strings.NewReader(c.in)
				if oneByte {
					r = iotest.OneByteReader(r) // every line crosses a buffer refill
				}
				rd, err := NewCSVReader(r)
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := readAll(t, rd, "amount", "")
				if c.want == nil { // the quoted-value case: check by hand below
					if err == nil {
						t.Fatalf("want an error for %q, got %v", c.in, got)
					}
					var re *RowError
					if !errors.As(err, &re) || re.Row != 1 || re.Column != "amount" || !errors.Is(err, ErrNotNumber) {
						t.Fatalf("error %v: want row 1, column amount, not a number", err)
					}
					if fmt.Sprint(got) != "[10]" {
						t.Fatalf("rows before the error = %v, want [10]", got)
					}
					continue
				}
				if err != nil {
					t.Fatalf("oneByte=%v: %v", oneByte, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("oneByte=%v: got %v, want %v", oneByte, got, c.want)
				}
			}
		})
	}
}

func TestCSVReaderErrors(t *testing.T) { inModes(t, testCSVReaderErrors) }

func testCSVReaderErrors(t *testing.T) {
	cases := []struct {
		name, in, value string
		want            error
		msg             string
	}{
		{"not a number", "ts,amount\n1,10\n2,abc\n", "amount", ErrNotNumber,
			`row 1 (line 3), column "amount": not a number: "abc"`},
		{"nan", "ts,amount\n1,NaN\n", "amount", ErrNotFinite,
			`row 0 (line 2), column "amount": value is NaN or infinite: "NaN"`},
		{"short row", "ts,amount\n1,10\n2\n", "amount", ErrFieldCount,
			"row 1 (line 3): wrong number of fields: 1, the header has 2"},
		{"long row", "ts,amount\n1,10,7\n", "amount", ErrFieldCount,
			"row 0 (line 2): wrong number of fields: 3, the header has 2"},
		{"unterminated quote", "ts,amount\n1,10\n\"2,20\n", "amount", ErrSyntax,
			"row 1 (line 3): malformed row: unterminated quoted field"},
		{"missing column", "ts,amount\n1,10\n", "price", ErrMissingColumn,
			`missing column "price" (columns: ts, amount)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd, err := NewCSVReader(strings.NewReader(c.in))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = readAll(t, rd, c.value, "")
			if !errors.Is(err, c.want) || err.Error() != c.msg {
				t.Fatalf("err = %v\nwant %q (%v)", err, c.msg, c.want)
			}
		})
	}
	if _, err := NewCSVReader(strings.NewReader("")); !errors.Is(err, ErrNoRows) {
		t.Errorf("empty input: %v, want ErrNoRows", err)
	}
}

func TestCSVReaderTimeColumn(t *testing.T) { inModes(t, testCSVReaderTimeColumn) }

func testCSVReaderTimeColumn(t *testing.T) {
	in := "ts,amount\n1764489600000,1\n2025-11-30T08:00:01Z,2\n\"2025-11-30T08:00:02.5+00:00\",3\n"
	rd, err := NewCSVReader(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	vs, ts, err := readAll(t, rd, "amount", "ts")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(vs, ts) != "[1 2 3] [1764489600000 1764489601000 1764489602500]" {
		t.Fatalf("got %v %v", vs, ts)
	}
	rd, _ = NewCSVReader(strings.NewReader("ts,amount\nlater,1\n"))
	_, _, err = readAll(t, rd, "amount", "ts")
	if !errors.Is(err, ErrTime) || !strings.Contains(err.Error(), `column "ts"`) {
		t.Fatalf("bad timestamp: %v", err)
	}
}

// TestCSVReaderLongLine forces the buffer to grow past its initial size.
func TestCSVReaderLongLine(t *testing.T) { inModes(t, testCSVReaderLongLine) }

func testCSVReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 3*readSize)
	in := "name,amount\n" + long + ",1\n\"" + long + "\",2\nshort,3\n"
	rd, err := NewCSVReader(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := readAll(t, rd, "amount", "")
	if err != nil || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestCSVReaderAllocatesNothingPerRow checks the sequential reader; the pipeline recycles its
// chunks and allocates one channel per chunk of about 1 MiB.
func TestCSVReaderAllocatesNothingPerRow(t *testing.T) {
	defer func(seq bool) { sequentialOnly = seq }(sequentialOnly)
	sequentialOnly = true
	var b strings.Builder
	b.WriteString("ts,amount\n")
	for i := 0; i < 50_000; i++ {
		fmt.Fprintf(&b, "%d,%d.%02d\n", 1764489600000+i, i%1000, i%100)
	}
	rd, err := NewCSVReader(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Select("amount", "ts"); err != nil {
		t.Fatal(err)
	}
	vals, ts := make([]float64, 100), make([]int64, 100)
	rd.Read(vals, ts) // the first call returns the peeked row
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := rd.Read(vals, ts); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Read of 100 rows: %v allocs", allocs)
	}
}

// FuzzCSVReader: no panic on any input, and wherever encoding/csv (strict) reads the input and
// every value is a number, the reader returns the same numbers.
func FuzzCSVReader(f *testing.F) {
	for _, s := range []string{
		"ts,amount\n1,10\n2,20.5\n",
		"name,amount\n\"a,b\",10\n\"say \"\"hi\"\"\",20\n",
		"name,amount\n\"line1\nline2\",10\r\n",
		"a,amount\n,1\n\n,2",
		"amount\n1e5\n-0\n",
		"\xef\xbb\xbfa,b\n1,2\n",
	} {
		f.Add(s)
	}
	defer func(size int) { chunkSize = size }(chunkSize)
	chunkSize = 16 // many chunks per input: the pipeline's cuts and fallbacks get fuzzed too
	f.Fuzz(func(t *testing.T, in string) {
		rd, err := NewCSVReader(iotest.HalfReader(strings.NewReader(in)))
		if err != nil {
			return
		}
		cols := rd.Columns()
		if len(cols) == 0 || indexOf(cols, cols[len(cols)-1]) != len(cols)-1 {
			return // Select takes the first of duplicate names
		}
		got, _, gerr := readAll(t, rd, cols[len(cols)-1], "")
		cr := csv.NewReader(strings.NewReader(in))
		recs, err := cr.ReadAll()
		if err != nil || len(recs) == 0 || strings.HasPrefix(in, "\xef\xbb\xbf") {
			return
		}
		var want []float64
		for _, rec := range recs[1:] {
			v, err := parseValue([]byte(rec[len(rec)-1]))
			if err != nil {
				return // the reader must fail too; its message is checked elsewhere
			}
			want = append(want, v)
		}
		if gerr != nil {
			t.Fatalf("reader failed (%v) where encoding/csv read %q", gerr, recs)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reader %v, encoding/csv %v", got, want)
		}
	})
}

func TestNDJSONReader(t *testing.T) {
	in := `{"ts":1764489600000,"key":"a","amount":10}
{"amount":"20.5","ts":"2025-11-30T08:00:01Z","extra":{"x":[1,"}"]}}

{"ts":1764489602000,"amount":-3,"amount":30,"k\u0065y":"b"}
`
	for _, oneByte := range []bool{false, true} {
		var r io.Reader = strings.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		rd, err := NewNDJSONReader(r)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rd.Columns()) != "[ts key amount]" || string(rd.FirstRow()[2]) != "10" {
			t.Fatalf("columns %v first %q", rd.Columns(), rd.FirstRow())
		}
		vs, ts, err := readAll(t, rd, "amount", "ts")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(vs, ts) != "[10 20.5 30] [1764489600000 1764489601000 1764489602000]" {
			t.Fatalf("got %v %v", vs, ts)
		}
	}
}

func TestNDJSONReaderErrors(t *testing.T) {
	cases := []struct{ in, msg string }{
		{"{\"amount\":1}\n{\"amount\":true}\n", `row 1 (line 2), column "amount": not a number: "true"`},
		{"{\"amount\":1}\n{\"price\":2}\n", `row 1 (line 2), column "amount": missing column`},
		{"{\"amount\":1}\n{\"amount\":2\n", `row 1 (line 2): malformed row: not a JSON object (unexpected end at byte 11)`},
		{"{\"amount\":1}\n[1]\n", `row 1 (line 2): malformed row: not a JSON object (no opening brace at byte 0)`},
		{"{\"amount\":1} x\n", `row 0 (line 1): malformed row: not a JSON object (text after the object at byte 13)`},
		{"{\"amount\":{\"v\":1}}\n", `row 0 (line 1), column "amount": not a number: "{\"v\":1}"`},
	}
	for _, c := range cases {
		rd, err := NewNDJSONReader(strings.NewReader(c.in))
		if err == nil {
			_, _, err = readAll(t, rd, "amount", "")
		}
		if err == nil || !strings.HasSuffix(err.Error(), c.msg) {
			t.Errorf("%q: err = %v\nwant … %s", c.in, err, c.msg)
		}
	}
}

// FuzzNDJSONReader: no panic; every line that encoding/json decodes into an object with a
// numeric "v" gives that number.
func FuzzNDJSONReader(f *testing.F) {
	for _, s := range []string{"{\"v\":1}\n{\"v\":2.5}\n", "{\"v\":\"3\",\"o\":{\"a\":[1,{}]}}\n", "{\"v\":1e400}\n", "{}\n", "{\"v\":1,}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rd, err := NewNDJSONReader(iotest.HalfReader(strings.NewReader(in)))
		if err != nil {
			return
		}
		if rd.Select("v", "") != nil {
			return
		}
		vals := make([]float64, 4)
		for i := 0; i < 1000; i++ {
			if _, err := rd.Read(vals, nil); err != nil {
				return
			}
		}
	})
}
