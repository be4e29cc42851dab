//go:build !audit_cdrdrop

package cdr

// planted reports whether the audit_cdrdrop build drops rec; never here.
func planted(*Record) bool { return false }
