package idem

import _ "github.com/stretchr/testify/require"
