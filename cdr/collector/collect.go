package collector

// Identity is what identifies one request's debit across records and
// OCPs: the subscriber, the chargingSessionIdentifier and the
// localSequenceNumber (the request's invocationSequenceNumber).
type Identity struct {
	SUPI    string
	Session string
	Seq     int64
}

// Collect applies the collector rule to records read from every OCP's
// files (in file order) and returns the records to bill and how many
// replay records it dropped as duplicates. A record that is not a
// replay record is always kept; its used-unit containers name the
// requests it holds. A replay record holds one request, answered as a
// replay by an OCP that had not recorded it: it is kept only when no
// other record holds that request — no kept record has a container with
// its identity, and no replay record of it was kept before. So a
// request whose first answer was recorded counts once, in that record;
// one whose first answer reached no recorder counts once, in the first
// replay record of it.
func Collect(recs []Record) (kept []Record, dropped int) {
	held := map[Identity]bool{}
	for i := range recs {
		r := &recs[i]
		if r.Replay {
			continue
		}
		for _, c := range r.Usage {
			held[Identity{r.SUPI, r.Session, c.Seq}] = true
		}
	}
	kept = make([]Record, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		if r.Replay {
			id := Identity{r.SUPI, r.Session, r.ReplaySeq}
			if held[id] {
				dropped++
				continue
			}
			held[id] = true
		}
		kept = append(kept, *r)
	}
	return kept, dropped
}
