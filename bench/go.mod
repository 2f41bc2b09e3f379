module github.com/idemkit/idem/bench

go 1.25.0

replace github.com/idemkit/idem => ../

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/google/uuid v1.6.0
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/idemkit/idem v0.0.0-00010101000000-000000000000
	github.com/idemkit/idem/pgjournal v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	golang.org/x/sys v0.45.0 // indirect
)

replace github.com/idemkit/idem/pgjournal => ../pgjournal
