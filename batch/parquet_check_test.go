package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/format"
)

// crcOrder is an order row with a dictionary-encoded region, so the fixture has dictionary
// pages as well as data pages.
type crcOrder struct {
	TS     int64   `parquet:"ts,timestamp(millisecond)"`
	Amount float64 `parquet:"amount"`
	Region string  `parquet:"region,dict"`
}

// crcParquet writes rows with parquet-go's writer, which sets every page's CRC-32 (the
// Parquet spec's page checksum): small pages and row groups, data pages of version v,
// snappy-compressed, so the CRC covers compressed bytes.
func crcParquet(t testing.TB, rows []order, v int) []byte {
	var b bytes.Buffer
	w := parquet.NewGenericWriter[crcOrder](&b, parquet.MaxRowsPerRowGroup(1000), parquet.PageBufferSize(2048),
		parquet.DataPageVersion(v), parquet.Compression(&snappy.Codec{}))
	out := make([]crcOrder, len(rows))
	for i, o := range rows {
		out[i] = crcOrder{TS: o.TS, Amount: o.Amount, Region: o.Region}
	}
	if _, err := w.Write(out); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pqPage is one page of a fixture: where its stored bytes are and what it is.
type pqPage struct {
	column     string
	rowGroup   int
	index      int // 1-based in its column chunk
	off, body  int64
	n          int
	dictionary bool
	crc        bool
}

// pagesOf lists every page of data's column chunks.
func pagesOf(t *testing.T, data []byte) []pqPage {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []pqPage
	for g, rg := range f.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			name := strings.Join(cc.MetaData.PathInSchema, ".")
			err := walkPages(bytes.NewReader(data), int64(len(data)), &cc.MetaData, func(off int64, i, hlen int, h *format.PageHeader) error {
				out = append(out, pqPage{name, g, i + 1, off, off + int64(hlen), int(h.CompressedPageSize),
					h.Type == format.DictionaryPage, h.CRC != 0})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

var crcJobs = []Job{
	{Size: 100, Column: "amount"}, // the fast path: typed pages on all cores
	{Size: 100, Column: "amount", GroupBy: "region", Aggs: []string{AggSum, AggP95}}, // row by row
	{Span: 60_000_000_000, Column: "amount", Aggs: []string{AggMax}},                 // ts too
}

// crcAnswers runs each of crcJobs over path, which must not fail.
func crcAnswers(t *testing.T, path string) map[int]string {
	t.Helper()
	want := map[int]string{}
	for i, j := range crcJobs {
		rep, err := runAllFile(t, j, path)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = fmt.Sprint(keys(rep))
	}
	return want
}

// TestParquetPageChecksums: in a file whose writer set page CRCs (parquet-go's), a bit flipped
// in any page a job reads, dictionary pages included, stops the job with ErrPageChecksum
// naming the column, row group, page and offset, for data pages of both versions and on the
// fast and row-by-row paths alike.
func TestParquetPageChecksums(t *testing.T) {
	rows := genOrders(3000, 4, 11)
	for _, v := range []int{1, 2} {
		data := crcParquet(t, rows, v)
		pages := pagesOf(t, data)
		dict := 0
		for _, pg := range pages {
			if !pg.crc {
				t.Fatalf("v%d: %s page %d has no CRC: the fixture must have them all", v, pg.column, pg.index)
			}
			if pg.dictionary {
				dict++
			}
		}
		if dict == 0 || len(pages) < 20 {
			t.Fatalf("v%d: %d pages, %d dictionary pages: the fixture should have many, dictionaries too", v, len(pages), dict)
		}
		path := writeTemp(t, "crc.parquet", data)
		want := crcAnswers(t, path)
		// Opening the file reads the first row of every column (for column detection): the
		// first data page of each column in row group 0, and its dictionary page.
		firstRow := map[string]int{}
		for _, pg := range pages {
			if _, ok := firstRow[pg.column]; !ok && pg.rowGroup == 0 && !pg.dictionary {
				firstRow[pg.column] = pg.index
			}
		}
		for _, pg := range pages {
			flipped := bytes.Clone(data)
			flipped[pg.body+int64(pg.n/2)] ^= 0x10
			if err := os.WriteFile(path, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			for i, j := range crcJobs {
				reads := pg.column == "amount" || pg.column == "region" && j.GroupBy != "" || pg.column == "ts" && j.Span > 0 ||
					pg.rowGroup == 0 && pg.index <= firstRow[pg.column]
				rep, err := runAllFile(t, j, path)
				if !reads {
					if err != nil || fmt.Sprint(keys(rep)) != want[i] {
						t.Errorf("v%d, %s page %d, a column job %d does not read: %v, %v", v, pg.column, pg.index, i, keys(rep), err)
					}
					continue
				}
				kind := "data page"
				if pg.dictionary {
					kind = "dictionary page"
				}
				msg := fmt.Sprintf("column %q: page %d (%s at byte %d): page checksum mismatch", pg.column, pg.index, kind, pg.off)
				if !errors.Is(err, ErrPageChecksum) || !errors.Is(err, ErrParquet) || !strings.Contains(err.Error(), msg) {
					t.Errorf("v%d, job %d, flip in %s page %d of row group %d: %v\nwant ErrPageChecksum, %s", v, i, pg.column, pg.index, pg.rowGroup, err, msg)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("row group %d", pg.rowGroup)) {
					t.Errorf("v%d: the error names no row group %d: %v", v, pg.rowGroup, err)
				}
			}
		}
	}
}

// TestParquetBitFlipsNeverSilent repeats issue #25's probe (random bit flips anywhere in a
// Parquet file) on a file with page CRCs: every flip gives the unflipped answer or an error,
// never other numbers. (On the DuckDB file, which has no page CRCs, 2 of 60 gave other sums;
// see TestParquetWithoutChecksums.)
func TestParquetBitFlipsNeverSilent(t *testing.T) {
	data := crcParquet(t, genOrders(3000, 4, 12), 2)
	path := writeTemp(t, "flip.parquet", data)
	want := crcAnswers(t, path)
	r := rand.New(rand.NewPCG(25, 6))
	caught := 0
	for range 60 {
		flipped := bytes.Clone(data)
		pos := 4 + r.IntN(len(data)-8) // not the magic bytes
		flipped[pos] ^= 1 << r.IntN(8)
		if err := os.WriteFile(path, flipped, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, j := range crcJobs {
			rep, err := runAllFile(t, j, path)
			if err != nil {
				caught++
				continue
			}
			if got := fmt.Sprint(keys(rep)); got != want[i] {
				t.Errorf("flip at byte %d: job %d answered %s, unflipped %s", pos, i, got, want[i])
			}
		}
	}
	t.Logf("60 flips × %d jobs: %d errors, the rest the unflipped answer", len(crcJobs), caught)
}

// TestParquetWithoutChecksums: what a file without page CRCs cannot detect, shown on the
// DuckDB fixture: its pages carry none, and a bit flipped in a stored value is read as another
// number, with no error. (The README and the package doc say so.)
func TestParquetWithoutChecksums(t *testing.T) {
	data, err := os.ReadFile("../testdata/orders_regions.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range pagesOf(t, data) {
		if pg.crc {
			t.Fatalf("%s page %d has a CRC: DuckDB sets them now; this test's point is gone", pg.column, pg.index)
		}
	}
	path := writeTemp(t, "duck.parquet", data)
	j := Job{Size: 100, Column: "amount"}
	base, err := runAllFile(t, j, path)
	if err != nil {
		t.Fatal(err)
	}
	silent := 0
	for _, pg := range pagesOf(t, data) {
		if pg.column != "amount" || pg.dictionary {
			continue
		}
		for k := 1; k < 20; k++ { // flips spread over the page (some land in snappy's framing)
			flipped := bytes.Clone(data)
			flipped[pg.body+int64(k*pg.n/20)] ^= 1
			if err := os.WriteFile(path, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			if rep, err := runAllFile(t, j, path); err == nil && fmt.Sprint(keys(rep)) != fmt.Sprint(keys(base)) {
				silent++
			}
		}
	}
	t.Logf("%d of 57 flips in the amount pages of a file without page CRCs changed the answer silently", silent)
	if silent == 0 {
		t.Fatal("no flip in an amount page changed the answer silently: is something now checking them?")
	}
}

// TestParquetWideFileOpensInBoundedMemory: opening a Parquet file reads its first row one
// column at a time. All at once, each column chunk held a 1 MiB read buffer and a decoded
// page: 2,000 columns of 10 rows cost 2 GB to open (5 GB for 5,000).
func TestParquetWideFileOpensInBoundedMemory(t *testing.T) {
	const ncol = 2000
	g := parquet.Group{}
	for i := range ncol {
		g[fmt.Sprintf("c%d", i)] = parquet.Leaf(parquet.DoubleType)
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[map[string]any](&b, parquet.NewSchema("wide", g))
	rows := make([]map[string]any, 10)
	for r := range rows {
		rows[r] = map[string]any{}
		for i := range ncol {
			rows[r][fmt.Sprintf("c%d", i)] = float64(r*ncol + i)
		}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, "wide.parquet", b.Bytes())
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := runAllFile(t, Job{Size: 2, Column: "c7"}, path)
	runtime.ReadMemStats(&after)
	if err != nil || len(rep.Results) != 1 || rep.Results[0].Best != 8*ncol+7+9*ncol+7 {
		t.Fatalf("%+v, %v", rep.Results, err)
	}
	// About 60 MB (550 under -race, which disables sync.Pool's reuse); before, 2 GB live.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
		t.Fatalf("a job over %d columns of 10 rows allocated %d MiB", ncol, alloc>>20)
	}
	src, err := newParquetRows(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil || len(src.FirstRow()) != ncol {
		t.Fatalf("first row: %d values, %v", len(src.FirstRow()), err)
	}
	for _, i := range []int{0, 7, ncol - 1} {
		name := fmt.Sprintf("c%d", i)
		if got := string(src.FirstRow()[indexOf(src.Columns(), name)]); got != fmt.Sprint(i) {
			t.Errorf("first row, %s: %q", name, got)
		}
	}
}
