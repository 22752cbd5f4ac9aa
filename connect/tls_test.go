package connect_test

import (
	"crypto/tls"
	"net"
)

func tlsClient(c net.Conn, cfg *tls.Config) net.Conn { return tls.Client(c, cfg) }
