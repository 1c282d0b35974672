package window

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// A SeriesPage keeps the first limit distinct ids after the cursor, whatever the order and
// repeats it is offered them in.
func TestSeriesPageSelects(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var offered []SeriesID
		for range rng.IntN(300) {
			offered = append(offered, SeriesID{Metric: string(rune('a' + rng.IntN(3))), Key: fmt.Sprint(rng.IntN(60))})
		}
		var after *SeriesID
		if rng.IntN(2) == 0 {
			after = &SeriesID{Metric: string(rune('a' + rng.IntN(3))), Key: fmt.Sprint(rng.IntN(60))}
		}
		limit := rng.IntN(40) - 5
		var want []SeriesID
		for _, id := range offered {
			if (after == nil || CompareSeriesIDs(id, *after) > 0) && !slices.Contains(want, id) {
				want = append(want, id)
			}
		}
		slices.SortFunc(want, CompareSeriesIDs)
		if limit > 0 && len(want) > limit {
			want = want[:limit]
		}
		k := NewSeriesPage(after, limit)
		for _, id := range offered {
			k.Offer(id.Metric, id.Key)
		}
		if got := k.IDs(); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("limit %d after %v: %v, want %v", limit, after, got, want)
		}
	}
}
