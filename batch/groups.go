package batch

// rowMeta is what a result says about a row besides its value.
type rowMeta struct {
	row, line, ts int64
	id            string
}

// groupState is one group's windows: an aggregator per aggregate, and the rows of its current
// window (ring, oldest first; local row index base) for naming a best window's first row.
type groupState struct {
	name  string
	id    int // creation order (runRows' chunks sort rows by it)
	aggs  []aggregator
	local int64 // rows of this group so far
	// The ring of the window's rows: row and line always, ts and id only when the job has
	// them (parallel rings of the same power-of-two size: less memory traffic per row).
	meta  []rowLine
	tss   []int64
	ids   []string
	head  int   // ring start
	nmeta int   // ring length
	base  int64 // local index of meta[head]
	best  []bestWin
	hasTS bool
	hasID bool
}

type rowLine struct{ row, line int64 }

type bestWin struct {
	found      bool
	v          float64
	start, end rowMeta
}

func (g *groupState) push(m rowMeta) {
	if g.nmeta == len(g.meta) {
		n := max(16, 2*len(g.meta)) // a power of two: indexes are masked
		meta := make([]rowLine, n)
		var tss []int64
		var ids []string
		if g.hasTS {
			tss = make([]int64, n)
		}
		if g.hasID {
			ids = make([]string, n)
		}
		for i := 0; i < g.nmeta; i++ {
			k := (g.head + i) & (len(g.meta) - 1)
			meta[i] = g.meta[k]
			if g.hasTS {
				tss[i] = g.tss[k]
			}
			if g.hasID {
				ids[i] = g.ids[k]
			}
		}
		g.meta, g.tss, g.ids, g.head = meta, tss, ids, 0
	}
	k := (g.head + g.nmeta) & (len(g.meta) - 1)
	g.meta[k] = rowLine{m.row, m.line}
	if g.hasTS {
		g.tss[k] = m.ts
	}
	if g.hasID {
		g.ids[k] = m.id
	}
	g.nmeta++
}

// dropBefore forgets the rows before local index i.
func (g *groupState) dropBefore(i int64) {
	if n := i - g.base; n > 0 {
		n = min(n, int64(g.nmeta))
		if g.hasID { // let the strings go
			for k := int64(0); k < n; k++ {
				g.ids[(g.head+int(k))&(len(g.meta)-1)] = ""
			}
		}
		g.head = (g.head + int(n)) & (len(g.meta) - 1)
		g.nmeta -= int(n)
		g.base += n
	}
}

func (g *groupState) at(local int64) rowMeta {
	k := (g.head + int(local-g.base)) & (len(g.meta) - 1)
	m := rowMeta{row: g.meta[k].row, line: g.meta[k].line}
	if g.hasTS {
		m.ts = g.tss[k]
	}
	if g.hasID {
		m.id = g.ids[k]
	}
	return m
}
