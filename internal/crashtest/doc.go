// Package crashtest holds the evidence that idem keeps its journal
// promises when the process dies and the server misbehaves.
//
// The crash harness (TestCrashHarness, in this package's tests) runs the real
// client in child processes against the idem-fakeserver command with random
// faults on, SIGKILLs the children at random moments and at fixed crash
// points, and checks that no operation ran twice on the server, none that was
// acknowledged was lost and none was marked failed although the server
// performed it.
//
// The fault matrix (RunScenario, printed by the faultmatrix command) runs a
// fixed workload through the client under each fake-server fault alone and a
// mixed profile, and tabulates the outcomes:
//
//	go run ./internal/crashtest/cmd/faultmatrix
package crashtest
