module github.com/idemkit/idem

go 1.25.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/google/uuid v1.6.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.45.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
