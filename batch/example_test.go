package batch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/slide-metrics/slide/batch"
)

// The best 3 consecutive orders, with every window's sum as the series.
func ExampleJob_Run() {
	orders := "ts,amount\n1,120\n2,80\n3,300\n4,90\n5,95\n6,40\n7,500\n8,60\n"
	res, err := batch.Job{Size: 3, Agg: batch.AggSum}.Run(context.Background(), strings.NewReader(orders), os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	// Output:
	// 500
	// 470
	// 485
	// 225
	// 635
	// 600
	// {"agg":"sum","size":3,"n":8,"best":635,"start":4,"end":6}
}

// A time window: the busiest minute, counting requests in (ts − 60 s, ts].
func ExampleJob_Run_timeWindow() {
	hits := `{"ts":"2025-11-30T08:00:00Z","latency_ms":80}
{"ts":"2025-11-30T08:00:10Z","latency_ms":120}
{"ts":"2025-11-30T08:00:30Z","latency_ms":95}
{"ts":"2025-11-30T08:00:59.999Z","latency_ms":300}
{"ts":"2025-11-30T08:01:00Z","latency_ms":90}
{"ts":"2025-11-30T08:01:30.001Z","latency_ms":60}
`
	job := batch.Job{Span: time.Minute, Agg: batch.AggCount}
	res, err := job.Run(context.Background(), strings.NewReader(hits), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	// Output:
	// {"agg":"count","span_ms":60000,"n":6,"best":4,"start":0,"end":3,"start_ts":1764489600000,"end_ts":1764489659999}
}

// Errors name the row and the column.
func ExampleRowError() {
	_, err := batch.Job{Size: 2}.Run(context.Background(), strings.NewReader("ts,amount\n1,10\n2,ten\n"), nil)
	fmt.Println(err)
	// Output: row 1 (line 3), column "amount": not a number: "ten"
}
