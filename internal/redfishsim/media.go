package redfishsim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Virtual media of a QEMU machine: a BMC fetches the image its virtual CD
// was given (Redfish's TransferMethod Stream reads it as the machine
// reads the CD; this one copies it whole, which a machine cannot tell
// apart). An http(s) image is downloaded to a file of the machine's own
// directory when a boot needs it, and the boot's Image becomes that
// file's URL, which DefaultBootArgs (or a caller's BootArgs) attaches as
// the VM's CD.

// CDEjector is a Machine whose CD drive holds a medium while it runs
// (QEMU's, attached at the start): the BMC's EjectMedia takes it out
// there too, so that a machine that reboots after the eject does not
// boot the CD again.
type CDEjector interface {
	EjectCD(ctx context.Context) error
}

// EjectCD implements CDEjector: QMP eject of QEMUConfig.CDDevice, when
// one is named and the VM runs.
func (q *QEMU) EjectCD(ctx context.Context) error {
	if q.cfg.CDDevice == "" {
		return nil
	}
	gone, err := q.qmp(ctx, func(c *QMP) error {
		_, err := c.Execute(ctx, "eject", map[string]any{"id": q.cfg.CDDevice, "force": true})
		return err
	})
	if gone {
		return nil // off: the next start attaches what the next boot asks
	}
	return err
}

// fetchTimeout bounds one image download.
const fetchTimeout = 5 * time.Minute

// localImage returns boot with an http(s) Image of a CD boot replaced by
// a file:// URL of its downloaded copy; other boots as they are.
func (q *QEMU) localImage(boot Boot) (Boot, error) {
	if boot.Target != "Cd" || boot.Image == "" {
		return boot, nil
	}
	u, err := url.Parse(boot.Image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return boot, nil
	}
	q.mu.Lock()
	if q.mediaDir == "" {
		if q.mediaDir, err = os.MkdirTemp("", "redfishsim-media-"); err != nil {
			q.mu.Unlock()
			return boot, fmt.Errorf("redfishsim: virtual media: %w", err)
		}
	}
	dir := q.mediaDir
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(q.ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, boot.Image, nil)
	if err != nil {
		return boot, fmt.Errorf("redfishsim: virtual media %s: %w", boot.Image, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return boot, fmt.Errorf("redfishsim: virtual media: fetch %s: %w", boot.Image, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return boot, fmt.Errorf("redfishsim: virtual media: fetch %s: %s", boot.Image, resp.Status)
	}
	f, err := os.CreateTemp(dir, "cd-*.iso")
	if err != nil {
		return boot, fmt.Errorf("redfishsim: virtual media: %w", err)
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return boot, fmt.Errorf("redfishsim: virtual media: fetch %s: %w", boot.Image, err)
	}
	boot.Image = (&url.URL{Scheme: "file", Path: f.Name()}).String()
	return boot, nil
}

// patchMedia is a PATCH of the virtual CD: Image (a URL, or null or ""
// with Inserted false), Inserted, WriteProtected — how older services
// insert and eject without the actions.
func (b *BMC) patchMedia(w http.ResponseWriter, r *http.Request, s *system) *apiError {
	body, aerr := decodeObject(r)
	if aerr != nil {
		return aerr
	}
	var msgs []message
	var image *string
	var inserted, writeProtected *bool
	for _, k := range sortedKeys(body) {
		raw := body[k]
		switch k {
		case "Image":
			var v *string
			if err := json.Unmarshal(raw, &v); err != nil {
				msgs = append(msgs, msgTypeError("#/Image", k, string(raw)))
				continue
			}
			if v == nil {
				v = new(string)
			}
			if *v != "" {
				if u, err := url.Parse(*v); err != nil || u.Scheme == "" || (u.Host == "" && u.Scheme != "file") {
					msgs = append(msgs, message{id: "PropertyValueFormatError",
						text: fmt.Sprintf("The value '%s' for the property Image is of a different format than the property can accept.", *v),
						args: []string{*v, "Image"}, related: []string{"#/Image"}})
					continue
				}
			}
			image = v
		case "Inserted", "WriteProtected":
			var v bool
			if err := json.Unmarshal(raw, &v); err != nil {
				msgs = append(msgs, msgTypeError("#/"+k, k, string(raw)))
				continue
			}
			if k == "Inserted" {
				inserted = &v
			} else {
				writeProtected = &v
			}
		default:
			msgs = append(msgs, msgPropertyUnknown("#/"+k, k))
		}
	}
	if len(msgs) > 0 {
		return newError(http.StatusBadRequest, msgs...)
	}
	s.mu.Lock()
	if image != nil {
		s.image = *image
		if inserted == nil {
			s.inserted = *image != ""
		}
	}
	if inserted != nil {
		s.inserted = *inserted && s.image != ""
	}
	if writeProtected != nil {
		s.writeProtected = *writeProtected
	}
	ejected := !s.inserted
	if ejected {
		s.image = ""
	}
	s.mu.Unlock()
	if e, ok := s.machine.(CDEjector); ok && ejected {
		if err := e.EjectCD(r.Context()); err != nil {
			return errInternal(fmt.Errorf("eject the machine's CD: %w", err))
		}
	}
	writeResource(w, cdResource(s, b.Faults().NoMediaActions))
	return nil
}
