package reader

// laneOf is the lane of a record with partition key key among factor lanes:
// the FNV-1a hash of the key modulo factor. The function is fixed (a run
// that continues another routes a key to the same lane at the same factor),
// so one key's records always go through one lane, in order.
func laneOf(key string, factor int) int {
	if factor <= 1 {
		return 0
	}
	// FNV-1a, 32 bits (hash/fnv's New32a), written out: a record's routing
	// allocates nothing.
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(factor))
}

// ledger keeps what a run read past the checkpoint, in shard order, and
// applies the checkpoint rule: the checkpoint is the last record such that
// every record at or before it settled (delivered, or given up under the
// failure policy). Records of other lanes settled further on wait in the
// ledger until those before them settle.
type ledger struct {
	base    int // index of entries[0]
	entries []entry
	records int // Kinesis records the entries stand for
	bytes   int // data of the entries not yet settled
}

// entry is one unit (or a stretch of records with nothing to deliver).
type entry struct {
	ckpt    string // the checkpoint once this entry and all before it settled
	records int    // Kinesis records it stands for
	bytes   int
	settled bool
}

// add appends e and returns its index.
func (l *ledger) add(e entry) int {
	l.entries = append(l.entries, e)
	l.records += e.records
	if !e.settled {
		l.bytes += e.bytes
	}
	return l.base + len(l.entries) - 1
}

// settle marks entry i settled. An index already passed or settled is
// ignored.
func (l *ledger) settle(i int) {
	k := i - l.base
	if k < 0 || k >= len(l.entries) || l.entries[k].settled {
		return
	}
	l.entries[k].settled = true
	l.bytes -= l.entries[k].bytes
}

// isSettled reports whether entry i settled (or was passed).
func (l *ledger) isSettled(i int) bool {
	k := i - l.base
	return k < 0 || (k < len(l.entries) && l.entries[k].settled)
}

// advance drops the leading settled entries and returns the checkpoint they
// move to; ok is false when the head did not move.
func (l *ledger) advance() (ckpt string, ok bool) {
	k := 0
	for k < len(l.entries) && l.entries[k].settled {
		ckpt = l.entries[k].ckpt
		l.records -= l.entries[k].records
		k++
	}
	if k == 0 {
		return "", false
	}
	// Moved down in place: the array is as long as the most the run held
	// unsettled at once, and an advance allocates nothing.
	l.entries = l.entries[:copy(l.entries, l.entries[k:])]
	l.base += k
	return ckpt, true
}

// head is the index of the first entry not settled (= next index when
// every entry settled).
func (l *ledger) head() int { return l.base }

// empty reports whether everything added settled and was passed.
func (l *ledger) empty() bool { return len(l.entries) == 0 }

// ahead is what a previous run of the loop settled past its checkpoint
// (State.SettledTo, State.Lanes, State.Factor): a record up to to is
// settled unless its lane at factor has a pending record at or before it.
type ahead struct {
	to      string
	factor  int
	pending []string
}

func aheadOf(st State) ahead {
	if st.SettledTo == "" || st.Factor < 1 || len(st.Lanes) != st.Factor {
		return ahead{}
	}
	a := ahead{to: st.SettledTo, factor: st.Factor, pending: make([]string, st.Factor)}
	for i, l := range st.Lanes {
		a.pending[i] = l.Pending
	}
	return a
}

// settled reports whether the record seq of partition key key was settled
// by the run that left a.
func (a ahead) settled(seq, key string) bool {
	if a.to == "" || seqLess(a.to, seq) {
		return false
	}
	p := a.pending[laneOf(key, a.factor)]
	return p == "" || seqLess(seq, p)
}
