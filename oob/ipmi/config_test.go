package ipmi_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim/oob/ipmi"
)

// TestConfig: what would become another ipmitool option, or cannot be
// sent, is refused before anything runs; the port defaults to 623.
func TestConfig(t *testing.T) {
	d := ipmi.NewDriver("")
	good := ipmi.Config{Host: "10.0.0.5", Username: "admin", Password: "pw"}
	b, err := d.BMC(good)
	if err != nil {
		t.Fatalf("BMC(%+v): %v", good, err)
	}
	if got := b.Addr(); got != "10.0.0.5:623" {
		t.Fatalf("Addr: got %q, want 10.0.0.5:623", got)
	}
	if b, err := d.BMC(ipmi.Config{Host: "fd00::5", Port: 6230, Username: "admin"}); err != nil || b.Addr() != "[fd00::5]:6230" {
		t.Fatalf("IPv6: got %v, %v", b, err)
	}
	for _, c := range []struct {
		name string
		edit func(*ipmi.Config)
		want string
	}{
		{"no host", func(c *ipmi.Config) { c.Host = "" }, "host"},
		{"host as an option", func(c *ipmi.Config) { c.Host = "-Iopen" }, "host"},
		{"host with a space", func(c *ipmi.Config) { c.Host = "a b" }, "host"},
		{"port", func(c *ipmi.Config) { c.Port = 70000 }, "port"},
		{"no user", func(c *ipmi.Config) { c.Username = "" }, "username"},
		{"user as an option", func(c *ipmi.Config) { c.Username = "-P" }, "username"},
		{"long password", func(c *ipmi.Config) { c.Password = strings.Repeat("x", 21) }, "password"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.edit(&cfg)
			_, err := d.BMC(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %s", err, c.want)
			}
			if cfg.Password != "" && strings.Contains(err.Error(), cfg.Password) {
				t.Fatalf("error %q holds the password", err)
			}
		})
	}
}
