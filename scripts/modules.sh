# The nested modules, each with dependencies the root module must not
# have (OpenTelemetry, Prometheus, pgx). scripts/test.sh and .ci/run vet
# and test every one; add a new nested module here.
NESTED_MODULES="idemotel examples/service pgjournal"
