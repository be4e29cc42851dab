//go:build !audit_misrate

package ocp

// misrate is the identity outside the audit_misrate build.
func misrate(r *Rate) *Rate { return r }
