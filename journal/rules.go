package journal

// The journal's rules and record encoding, for other implementations of
// the client's Store (the PostgreSQL journal): one set of rules, so that a
// record one journal accepts the other accepts too, and one encoding, so
// that what is stored is what the bbolt journal stores (never a
// credential: the client refuses to journal one).

// CheckRecord reports, with an error matching ErrInvalid, whether r breaks
// the rules every stored record obeys: scope and key non-empty, without
// NUL bytes and not too long; a valid state; BodySHA the SHA-256 of Body;
// a Settled time on a terminal record.
func CheckRecord(r *Record) error {
	if r == nil {
		return errorf("nil record: %w", ErrInvalid)
	}
	return validate(r)
}

// CheckID is CheckRecord's rule for a scope and key alone, for reads.
func CheckID(scope, key string) error { return validateID(scope, key) }

// CheckChange reports, with an error matching ErrInvalid, whether r, the
// record an Update's function returned, may replace was, the stored
// record (of which the function was given a copy): the request (scope,
// key, method, URLs, headers, body), Created and a manual resolution must
// not change, and r must obey CheckRecord's rules.
func CheckChange(was, r *Record) error { return validateChange(was, r) }

// CheckManual reports, with an error matching ErrInvalid, whether m is not
// a valid manual resolution.
func CheckManual(m Manual) error {
	if err := m.validate(); err != nil {
		return errorf("%w: %w", err, ErrInvalid)
	}
	return nil
}

// ApplyManual settles r as Resolve does with m, which must pass
// CheckManual.
func ApplyManual(r *Record, m Manual) { m.resolve(r) }

// EncodeRecord appends the journal's encoding of r, which must pass
// CheckRecord, to dst.
func EncodeRecord(dst []byte, r *Record) []byte { return encode(dst, r) }

// DecodeRecord decodes what EncodeRecord encoded. It never panics; a
// damaged or unknown encoding is an error matching ErrCorrupt or
// ErrVersion.
func DecodeRecord(b []byte) (*Record, error) { return decode(b) }

// CloneRecord returns a deep copy of r, equal to DecodeRecord of its
// encoding. r must pass CheckRecord.
func CloneRecord(r *Record) *Record { return clone(r) }
