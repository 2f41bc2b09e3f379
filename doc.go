// Package idem calls payment and order APIs so that one business intent
// becomes exactly one side effect on the server, whatever the network does.
package idem
