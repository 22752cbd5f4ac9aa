package agent

import (
	"os"
	"path/filepath"

	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// ReadSecureBoot reads the firmware's Secure Boot state below sysRoot
// ("/" on a machine) from efivarfs: the global variables SecureBoot and
// SetupMode (each the 4-byte attributes, then one byte). No
// sys/firmware/efi is a legacy BIOS boot; a UEFI machine whose efivarfs is
// not mounted, or whose variables cannot be read, is reported
// UNSPECIFIED, which the server does not take for "Secure Boot on".
func ReadSecureBoot(sysRoot string) provisioningv1.SecureBootState {
	efi := filepath.Join(sysRoot, "sys", "firmware", "efi")
	if _, err := os.Stat(efi); err != nil {
		return provisioningv1.SecureBootState_SECURE_BOOT_STATE_NOT_UEFI
	}
	vars := filepath.Join(efi, "efivars")
	if _, err := os.Stat(vars); err != nil {
		return provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED
	}
	setup, serr := efiByte(filepath.Join(vars, "SetupMode-"+efiGlobal))
	sb, err := efiByte(filepath.Join(vars, "SecureBoot-"+efiGlobal))
	switch {
	case err == nil && sb == 1 && serr == nil && setup == 0:
		return provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED
	case serr == nil && setup == 1:
		return provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE
	case err == nil && sb == 0, os.IsNotExist(err):
		// Firmware without Secure Boot support has no SecureBoot variable.
		return provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED
	}
	return provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED
}

// efiByte reads a one-byte EFI variable's value from its efivarfs file.
func efiByte(path string) (byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(b) != 5 {
		return 0, &os.PathError{Op: "read", Path: path, Err: os.ErrInvalid}
	}
	return b[4], nil
}
