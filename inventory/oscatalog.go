package inventory

import (
	"context"

	"github.com/eimhq/eim"
)

// The OS catalog's writes of OS resources (see status.go): the os module
// loads the profiles of its manifests into every project and keeps them
// following their manifests.

// catalogFields are the fields of an OS resource that its profile's
// manifest gives (UpdateCatalogOS); the rest (metadata, the repository,
// the CVE lists) are left as they are.
var catalogFields = []string{
	"name", "architecture", "imageUrl", "imageId", "description", "sha256", "profileName", "profileVersion",
	"installedPackages", "installedPackagesUrl", "platformBundle", "tlsCaCert", "existingCvesUrl", "fixedCvesUrl",
	"securityFeature", "osType", "osProvider",
}

// CreateCatalogOS creates in tx an OS resource of the catalog (its
// project set by the caller or the transaction), validated, with the
// inventory's enum defaults. A name another OS of the project has is
// ECONFLICT.
func CreateCatalogOS(ctx context.Context, tx eim.Tx, o *eim.OS) error {
	if err := eim.Validate(o); err != nil {
		return err
	}
	normalizeEnums(o)
	return tx.Create(ctx, o)
}

// UpdateCatalogOS writes the fields of an OS resource of the catalog that
// its manifest gives (catalogFields) from o, read in tx and changed to
// follow the manifest, validated. The write is made only over the version
// read (OS resources are kept across transactions; see eim.Tx.Update).
func UpdateCatalogOS(ctx context.Context, tx eim.Tx, o *eim.OS) error {
	if err := eim.Validate(o); err != nil {
		return err
	}
	normalizeEnums(o)
	return tx.UpdateFields(ctx, o, catalogFields...)
}
