package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim/agent"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

func TestReadSecureBoot(t *testing.T) {
	const guid = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	tests := []struct {
		name       string
		efi, vars  bool
		secureBoot []byte // nil: absent
		setupMode  []byte
		want       provisioningv1.SecureBootState
	}{
		{"legacy BIOS", false, false, nil, nil, provisioningv1.SecureBootState_SECURE_BOOT_STATE_NOT_UEFI},
		{"efivarfs not mounted", true, false, nil, nil, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED},
		{"enforced", true, true, []byte{6, 0, 0, 0, 1}, []byte{6, 0, 0, 0, 0}, provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED},
		{"off", true, true, []byte{6, 0, 0, 0, 0}, []byte{6, 0, 0, 0, 0}, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED},
		{"setup mode", true, true, []byte{6, 0, 0, 0, 0}, []byte{6, 0, 0, 0, 1}, provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE},
		{"no Secure Boot support", true, true, nil, nil, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED},
		{"malformed", true, true, []byte{1}, []byte{6, 0, 0, 0, 0}, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			vars := filepath.Join(root, "sys", "firmware", "efi", "efivars")
			switch {
			case tt.vars:
				os.MkdirAll(vars, 0o755)
			case tt.efi:
				os.MkdirAll(filepath.Dir(vars), 0o755)
			}
			if tt.secureBoot != nil {
				os.WriteFile(filepath.Join(vars, "SecureBoot-"+guid), tt.secureBoot, 0o644)
			}
			if tt.setupMode != nil {
				os.WriteFile(filepath.Join(vars, "SetupMode-"+guid), tt.setupMode, 0o644)
			}
			if got := agent.ReadSecureBoot(root); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
