package idem

import (
	_ "github.com/cenkalti/backoff/v4"
	_ "github.com/google/uuid"
	_ "go.etcd.io/bbolt"
)
