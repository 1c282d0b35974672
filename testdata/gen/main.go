// Command gen writes the orders files that slide batch is tested and benchmarked on.
//
//	go run ./testdata/gen -rows 100000 -o testdata/orders.csv                  # the article's orders
//	go run ./testdata/gen -rows 10000000 -amounts cents -o testdata/bench/orders-10m.csv
//
// Every file has a header (CSV) or one object per line (NDJSON) with two fields: ts, the order
// time (increasing, 0–1199 ms apart, starting at -start; unix ms or, with -time rfc3339, RFC
// 3339 text), and the value field (-field, default amount).
// With -amounts article, amount is the article's ((i·7919) mod 1000) + 1, so every window of
// 1,000 consecutive orders sums to 500500; with -amounts cents it is a pseudo-random price with
// two decimals in [0.01, 999.99] from a fixed-seed generator, so windows differ and the best
// one is a real search; with -amounts latency it is a request latency in ms with a long tail.
// With -regions N (N ≥ 1) every row also has an order_id (first column, 100001, 100002, …) and
// a region (last column: eu, us, apac, latam, mea, anz for N ≤ 6, else r0000…), drawn from a
// generator of its own, so the ts and amount columns are the same as without it.
// The output is the same for the same flags on every machine.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	rows := flag.Int("rows", 100_000, "number of orders")
	out := flag.String("o", "-", "output file, - for stdout (parent directories are created)")
	format := flag.String("format", "csv", "csv or ndjson")
	amounts := flag.String("amounts", "article", "article ((i*7919)%1000+1), cents (pseudo-random, two decimals) or latency (ms, long tail)")
	field := flag.String("field", "amount", "name of the value field")
	timeFmt := flag.String("time", "ms", "ts format: ms (unix milliseconds) or rfc3339")
	start := flag.Int64("start", 1_764_489_600_000, "timestamp of the first order, unix ms")
	seed := flag.Uint64("seed", 1, "seed for -amounts cents and the time gaps")
	flag.IntVar(&regions, "regions", 0, "add order_id and region columns, with this many regions")
	flag.Parse()
	if err := run(*out, *format, *amounts, *field, *timeFmt, *rows, *start, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// regions is -regions: 0 for the two-column files.
var regions int

var regionNames = []string{"eu", "us", "apac", "latam", "mea", "anz"}

func regionName(i int) string {
	if regions <= len(regionNames) {
		return regionNames[i]
	}
	return fmt.Sprintf("r%04d", i)
}

func run(out, format, amounts, field, timeFmt string, rows int, start int64, seed uint64) error {
	if format != "csv" && format != "ndjson" {
		return fmt.Errorf("-format %q: want csv or ndjson", format)
	}
	if amounts != "article" && amounts != "cents" && amounts != "latency" {
		return fmt.Errorf("-amounts %q: want article, cents or latency", amounts)
	}
	if timeFmt != "ms" && timeFmt != "rfc3339" {
		return fmt.Errorf("-time %q: want ms or rfc3339", timeFmt)
	}
	var w io.Writer = os.Stdout
	if out != "-" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if format == "csv" {
		if regions > 0 {
			bw.WriteString("order_id,ts," + field + ",region\n")
		} else {
			bw.WriteString("ts," + field + "\n")
		}
	}
	rx := seed*0xD1B54A32D192ED03 + 7 // the regions' own generator
	nextRegion := func() int {
		rx ^= rx << 13
		rx ^= rx >> 7
		rx ^= rx << 17
		return int(rx % uint64(regions))
	}
	x := seed*0x9E3779B97F4A7C15 + 1 // splitmix64 state
	next := func() uint64 {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	ts := start
	var line []byte
	for i := 0; i < rows; i++ {
		line = line[:0]
		if format == "ndjson" {
			line = append(line, '{')
		}
		if regions > 0 {
			if format == "ndjson" {
				line = append(line, `"order_id":`...)
			}
			line = strconv.AppendInt(line, int64(100001+i), 10)
			line = append(line, ',')
		}
		if format == "ndjson" {
			line = append(line, `"ts":`...)
		}
		if timeFmt == "rfc3339" {
			if format == "ndjson" {
				line = append(line, '"')
			}
			line = time.UnixMilli(ts).UTC().AppendFormat(line, "2006-01-02T15:04:05.000Z07:00")
			if format == "ndjson" {
				line = append(line, '"')
			}
		} else {
			line = strconv.AppendInt(line, ts, 10)
		}
		if format == "ndjson" {
			line = append(line, `,"`+field+`":`...)
		} else {
			line = append(line, ',')
		}
		switch amounts {
		case "article":
			line = strconv.AppendInt(line, int64((i*7919)%1000+1), 10)
		case "latency": // 20–99 ms, with a 1-in-15 tail up to 2 s
			ms := 20 + next()%80
			if next()%15 == 0 {
				ms += next() % 2000
			}
			line = strconv.AppendUint(line, ms, 10)
		default:
			c := next()%99_999 + 1 // cents
			line = strconv.AppendUint(line, c/100, 10)
			line = append(line, '.', byte('0'+c/10%10), byte('0'+c%10))
		}
		if regions > 0 {
			if format == "ndjson" {
				line = append(line, `,"region":"`...)
				line = append(line, regionName(nextRegion())...)
				line = append(line, '"')
			} else {
				line = append(line, ',')
				line = append(line, regionName(nextRegion())...)
			}
		}
		if format == "ndjson" {
			line = append(line, '}')
		}
		line = append(line, '\n')
		bw.Write(line)
		ts += int64(next() % 1200)
	}
	return bw.Flush()
}
