package oscatalog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// packageFetchTimeout bounds each download of a package manifest.
const packageFetchTimeout = 30 * time.Second

// FetchPackages returns a copy of c in which every profile with a package
// manifest URL (osPackageManifestURL) and no inline list carries the list
// published there as its installedPackages, as the original's OS manager
// did for immutable OSes. A list that cannot be fetched (unreachable, not
// 200, over the OS resource's limit, not JSON) is left empty and reported
// in errs; c itself is not changed.
func FetchPackages(ctx context.Context, c *Catalog, hc *http.Client) (out *Catalog, errs []error) {
	cp := &Catalog{byKey: map[Key]*Profile{}, Overrides: c.Overrides}
	for _, p := range c.profiles {
		q := *p
		if q.PackageManifestURL != "" && q.InstalledPackages == "" {
			list, err := fetchPackageList(ctx, hc, q.PackageManifestURL)
			if err != nil {
				errs = append(errs, fmt.Errorf("os profile %s: package manifest %s: %w", q.Source, q.PackageManifestURL, err))
			}
			q.InstalledPackages = list
		}
		cp.profiles = append(cp.profiles, &q)
		cp.byKey[q.Key()] = &q
	}
	if err := cp.computeDigest(); err != nil {
		return c, append(errs, err)
	}
	return cp, errs
}

func fetchPackageList(ctx context.Context, hc *http.Client, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, packageFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxInstalledPackages+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxInstalledPackages {
		return "", fmt.Errorf("longer than %d bytes", maxInstalledPackages)
	}
	if !json.Valid(b) {
		return "", fmt.Errorf("not JSON")
	}
	return string(b), nil
}
