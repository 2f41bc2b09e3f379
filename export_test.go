package idem

import "testing"

// ShareStore lets several open Clients use store until t ends: tests that
// run replicas' (or a crashed and a restarted process's) Clients on one
// journal, all configured alike.
func ShareStore(t testing.TB, store Store) {
	storeUsers.mu.Lock()
	defer storeUsers.mu.Unlock()
	if storeUsers.shared == nil {
		storeUsers.shared = make(map[Store]bool)
	}
	storeUsers.shared[store] = true
	t.Cleanup(func() {
		storeUsers.mu.Lock()
		defer storeUsers.mu.Unlock()
		delete(storeUsers.shared, store)
	})
}
