package chf

// ChargeRequest, ApplyRequest and ChargeResponse are the messages of the
// services' internal RPC (chassis/rpc): msgp-encoded (the *_gen.go
// codecs), each with a Reset that empties it and keeps its buffers, so a
// message can be decoded into again without allocating.

// Reset empties r, keeping the capacity of Lines.
func (r *ChargeResponse) Reset() {
	*r = ChargeResponse{Lines: r.Lines[:0], Buckets: r.Buckets[:0], Targets: r.Targets[:0]}
}
