package chf

// ChargeRequest, ApplyRequest and ChargeResponse are the messages of the
// services' internal RPC (chassis/rpc): msgp-encoded (the *_gen.go
// codecs), each with a Reset that empties it and keeps its buffers, so a
// message can be decoded into again without allocating.

// Reset empties r, keeping the capacity of Lines.
func (r *ChargeResponse) Reset() {
	*r = ChargeResponse{Lines: r.Lines[:0], Buckets: r.Buckets[:0], Targets: r.Targets[:0]}
}

// Repeatable reports whether r may be sent again as it is: the ABM
// answers a repeat from the account record as it answered the first,
// charging once (a create or event with a Key or a Session, an update or
// release of a session, by its Seq; a top-up with a Key, the operator's
// idempotency key), or it changes nothing (inquiries). A top-up without
// a Key, an abort or an unbar carries no identity and is not repeatable.
func (r *ChargeRequest) Repeatable() bool { return repeatable(r.Op, r.Key, r.Session) }

// Repeatable is ChargeRequest.Repeatable for the rated request.
func (r *ApplyRequest) Repeatable() bool { return repeatable(r.Op, r.Key, r.Session) }

func repeatable(op Op, key uint64, session string) bool {
	switch op {
	case OpCreate, OpEvent:
		return key != 0 || session != ""
	case OpTopUp:
		return key != 0
	case OpUpdate, OpRelease:
		return session != ""
	case OpBalance, OpSessions:
		return true
	}
	return false
}
