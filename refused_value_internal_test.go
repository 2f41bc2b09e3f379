package idem

import "testing"

// What a database's unique violation says of the value it refused
// decides whose row it is; a short key among a composite's values, or a
// value not ours on a column named for the order's id, leaves it to the
// index's name (named false), as does a value that is not row numbers.
func TestRefusedValue(t *testing.T) {
	const uuid = "3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f"
	for _, tt := range []struct {
		name, text, key string
		named, ours     bool
	}{
		{"mysql primary, the key", "Duplicate entry '7' for key 'orders.PRIMARY'", "7", true, true},
		{"mysql primary, another number", "Duplicate entry '8' for key 'orders.PRIMARY'", "7", true, false},
		// MySQL joins a composite's values with '-': a short number in
		// it may be any column's.
		{"mysql composite, a short key in it", "Duplicate entry '42-7' for key 'orders.uniq_merchant_ref'", "7", false, false},
		{"mysql composite, a uuid in it", "Duplicate entry '42-" + uuid + "' for key 'orders.uniq_merchant_ref'", uuid, true, true},
		{"mysql composite, a uuid upper-cased", "Duplicate entry '42-" + "3F2A9C1E-7B4D-4E8A-9C2F-1A2B3C4D5E6F" + "' for key 'orders.uniq_merchant_ref'", uuid, true, true},
		// Only row numbers are surely another's: a value of another shape
		// may be one the server derived from our key.
		{"mysql, the key inside a longer id", "Duplicate entry 'ord-70' for key 'orders.PRIMARY'", "ord-7", false, false},
		{"mysql composite of row numbers", "Duplicate entry '42-1234' for key 'orders.uniq_merchant_seq'", "ord-7", true, false},
		{"postgres, a hash of the key", "DETAIL:  Key (dedupe_hash)=(9f86d081884c7d65) already exists.", "ord-7", false, false},
		{"postgres, a uuid5 of the key", "DETAIL:  Key (id)=(" + uuid + ") already exists.", "ord-7", false, false},
		{"mysql, a column named for the order's id", "Duplicate entry 'x9' for key 'orders.order_id'", "ord-7", false, false},
		{"mysql, the key's member", "Duplicate entry 'ORD7' for key 'orders.client_order_id'", "ord-7", true, true},
		{"postgres composite, the key a part", "DETAIL:  Key (merchant_id, reference)=(42, 7) already exists.", "7", true, true},
		{"postgres sequence out of step", "DETAIL:  Key (id)=(1234) already exists.", "ord-7", true, false},
		{"postgres, a number equal to a numeric key", "DETAIL:  Key (id)=(1234) already exists.", "1234", true, true},
		{"postgres quoted column, the key's member", `DETAIL:  Key ("client_order_id")=(x) already exists.`, "ord-7", true, true},
		// PostgreSQL's uuid type reads a UUID without hyphens, in braces
		// or upper case, and writes it back 8-4-4-4-12 in lower case.
		{"postgres uuid column, our key as hex", "DETAIL:  Key (id)=(" + uuid + ") already exists.", "3f2a9c1e7b4d4e8a9c2f1a2b3c4d5e6f", true, true},
		{"postgres uuid column, our key in braces", "DETAIL:  Key (merchant_id, ref)=(42, " + uuid + ") already exists.", "{3F2A9C1E-7B4D4E8A-9C2F1A2B-3C4D5E6F}", true, true},
		{"postgres uuid column, another uuid", "DETAIL:  Key (id)=(" + uuid + ") already exists.", "3f2a9c1e7b4d4e8a9c2f1a2b3c4d5e60", false, false},
		// Django's UUIDField keeps it as char(32) on MySQL.
		{"mysql char(32) uuid, our key canonical", "Duplicate entry '3f2a9c1e7b4d4e8a9c2f1a2b3c4d5e6f' for key 'shop_order.PRIMARY'", uuid, true, true},
		{"no database's words", "Duplicate order sent.", "ord-7", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			named, ours := refusedValue(tt.text, "client_order_id", tt.key)
			if named != tt.named || ours != tt.ours {
				t.Errorf("refusedValue(%q, key %q) = %v, %v; want %v, %v", tt.text, tt.key, named, ours, tt.named, tt.ours)
			}
		})
	}
}
