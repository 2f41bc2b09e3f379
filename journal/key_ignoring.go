package journal

import (
	"bytes"
	"context"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// bucketKeyIgnoring holds the endpoints a Client learnt ignore the
// idempotency key (idem.KeyIgnoringStore), each a key with an empty value.
// Not made with the file, nor by a migration: the first AddKeyIgnoring
// makes it, so that a file made before it opens as it is. An older idem
// opens a file that has it, and neither reads nor changes it.
var bucketKeyIgnoring = []byte("key-ignoring")

const (
	// MaxKeyIgnoringEndpoints bounds the endpoints AddKeyIgnoring keeps:
	// their paths may hold ids, and the journal must not grow with them.
	MaxKeyIgnoringEndpoints = 1024
	// MaxKeyIgnoringEndpoint bounds the length of one endpoint, in bytes.
	MaxKeyIgnoringEndpoint = 4096
)

// AddKeyIgnoring records that endpoint (method, space, URL without its
// query) ignores the idempotency key, durably when it returns nil (see
// idem.KeyIgnoringStore). An endpoint already recorded writes nothing and
// returns nil. One more past MaxKeyIgnoringEndpoints writes nothing and is
// ErrKeyIgnoringFull: read as recorded, the Client would clear the last
// flag that tells the next process of the endpoint. An empty endpoint, one
// longer than MaxKeyIgnoringEndpoint or not valid UTF-8, is ErrInvalid.
func (s *Store) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	if err := s.usable(ctx); err != nil {
		return errorf("journal: add endpoint ignoring the key: %w", err)
	}
	if s.readOnly {
		return errorf("journal: add endpoint ignoring the key: %w", ErrReadOnly)
	}
	if endpoint == "" || len(endpoint) > MaxKeyIgnoringEndpoint || !utf8.ValidString(endpoint) {
		return errorf("journal: add endpoint ignoring the key: %w: %d bytes, up to %d of valid UTF-8 taken", ErrInvalid, len(endpoint), MaxKeyIgnoringEndpoint)
	}
	known, err := s.KeyIgnoringEndpoints(ctx)
	if err != nil {
		return err
	}
	for _, e := range known {
		if e == endpoint {
			return nil
		}
	}
	if len(known) >= MaxKeyIgnoringEndpoints {
		return errorf("journal: add endpoint ignoring the key: %w", ErrKeyIgnoringFull)
	}
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	if s.closed.Load() {
		return errorf("journal: add endpoint ignoring the key: %w", ErrClosed)
	}
	err = s.commitBolt(func(tx *bolt.Tx) error {
		g := &getter{}
		b := g.bucket(tx, bucketKeyIgnoring)
		if b == nil {
			// The file's first: nothing of it to check.
			b, err := tx.CreateBucket(bucketKeyIgnoring)
			if err != nil {
				return err
			}
			return b.Put([]byte(endpoint), []byte{})
		}
		// Counted again in the transaction, before its change (walk):
		// another call may have added since the read above.
		n, found, err := countKeys(tx, g, b, []byte(endpoint))
		if err != nil || found {
			return err
		}
		if n >= MaxKeyIgnoringEndpoints {
			return ErrKeyIgnoringFull
		}
		return g.put(tx, b, []byte(endpoint), []byte{})
	})
	if err != nil {
		return errorf("journal: add endpoint ignoring the key: %w", err)
	}
	return nil
}

// KeyIgnoringEndpoints returns the endpoints AddKeyIgnoring recorded, in
// byte order: none in a file made before it, or by an older idem.
func (s *Store) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	var out []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		g := &getter{}
		b := g.bucket(tx, bucketKeyIgnoring)
		if b == nil {
			return nil
		}
		c, err := g.walk(tx, b, bucketKeyIgnoring)
		if err != nil {
			return err
		}
		k, _, err := c.first()
		for ; err == nil && k != nil; k, _, err = c.next() {
			out = append(out, string(k))
		}
		return err
	})
	if err != nil {
		return nil, errorf("journal: read the endpoints ignoring the key: %w", err)
	}
	return out, nil
}

// countKeys counts b's keys, and reports whether key is one of them,
// reading b's pages checked, as they are before the transaction's first
// change (getter.walk).
func countKeys(tx *bolt.Tx, g *getter, b *bolt.Bucket, key []byte) (n int, found bool, err error) {
	c, err := g.walk(tx, b, bucketKeyIgnoring)
	if err != nil {
		return 0, false, err
	}
	k, _, err := c.first()
	for ; err == nil && k != nil; k, _, err = c.next() {
		n++
		found = found || bytes.Equal(k, key)
	}
	return n, found, err
}

// RemoveKeyIgnoring forgets endpoint, as AddKeyIgnoring recorded it, and
// reports whether it was recorded: for an operator whose provider has
// since made the endpoint de-duplicate by the key. A Client that learnt it
// already keeps it in memory until it is closed (its ForgetKeyIgnoring,
// the admin handler's POST /key-ignoring/remove, forgets it in both), and
// learns it again from an operation still open and flagged for it
// (ReviewKeyIgnored). It flags nothing: idem.RemoveKeyIgnoring first
// flags the open operations there that may have executed, which a
// process that no longer knows the endpoint would resend.
func (s *Store) RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, errorf("journal: remove endpoint ignoring the key: %w", err)
	}
	if s.readOnly {
		return false, errorf("journal: remove endpoint ignoring the key: %w", ErrReadOnly)
	}
	if endpoint == "" {
		return false, nil
	}
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	if s.closed.Load() {
		return false, errorf("journal: remove endpoint ignoring the key: %w", ErrClosed)
	}
	found := false
	err := s.commitBolt(func(tx *bolt.Tx) error {
		found = false // a retried run starts afresh
		g := &getter{}
		b := g.bucket(tx, bucketKeyIgnoring)
		if b == nil {
			return nil
		}
		v, err := g.get(tx, b, []byte(endpoint))
		if found = v != nil; err != nil || !found {
			return err
		}
		return g.del(tx, b, []byte(endpoint))
	})
	if err != nil {
		return false, errorf("journal: remove endpoint ignoring the key: %w", err)
	}
	return found, nil
}
