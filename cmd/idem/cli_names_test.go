package main

import "github.com/idemkit/idem/internal/cli"

// The tests name a few of the commands' helpers, which live in package
// cli since pgjournal/cmd/idem shares them.
var (
	explain   = cli.Explain
	writeJSON = cli.WriteJSON
	toJSON    = cli.ToJSON
)

type (
	recordJSON       = cli.RecordJSON
	checkJSON        = cli.CheckJSON
	confirmationJSON = cli.ConfirmationJSON
)

const reasonWidth = cli.ReasonWidth
