package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// The original's metadata broker: the label keys and values a project
// uses, which its web UI offers as suggestions and to which it posts the
// labels of every host, site or region it saves. Here the labels come from
// what the project's hosts, sites and regions carry, and from the pairs
// posted (recorded per project, lower-cased, as the broker kept them).

// LabelValues is a label key and the values a project uses with it.
type LabelValues struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// labelKinds are the kinds whose resources carry metadata.
var labelKinds = []eim.Kind{eim.KindRegion, eim.KindSite, eim.KindHost}

// MetadataSuggestions returns every label key a project uses, by key, each
// with its values, sorted.
func (s *Service) MetadataSuggestions(ctx context.Context, project string) ([]LabelValues, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	values := map[string]map[string]bool{}
	add := func(it eim.MetadataItem) {
		if values[it.Key] == nil {
			values[it.Key] = map[string]bool{}
		}
		values[it.Key][it.Value] = true
	}
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		for _, k := range labelKinds {
			// One group per distinct list of labels: a fleet's hosts
			// share a few, and their rows are not loaded.
			groups, err := tx.CountBy(ctx, k, eim.Query{}, "metadata")
			if err != nil {
				return fmt.Errorf("labels of %s: %w", k, err)
			}
			for _, g := range groups {
				var md eim.Metadata
				if err := json.Unmarshal([]byte(g.Values[0]), &md); err != nil {
					return fmt.Errorf("labels of %s: %w", k, err)
				}
				for _, it := range md {
					add(it)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	posted, err := s.store.MetadataPairs(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, it := range posted {
		add(it)
	}
	out := make([]LabelValues, 0, len(values))
	for k, vs := range values {
		lv := LabelValues{Key: k, Values: make([]string, 0, len(vs))}
		for v := range vs {
			lv.Values = append(lv.Values, v)
		}
		slices.Sort(lv.Values)
		out = append(out, lv)
	}
	slices.SortFunc(out, func(a, b LabelValues) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// RecordMetadata remembers pairs for the project's suggestions,
// lower-cased as the original's broker stored them, each checked as a
// resource's label is (field "metadata[i]"); at most eim.MaxMetadataItems.
func (s *Service) RecordMetadata(ctx context.Context, project string, pairs []eim.MetadataItem) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if len(pairs) > eim.MaxMetadataItems {
		return eim.Errorf(eim.EINVALID, "metadata: has %d items, at most %d allowed", len(pairs), eim.MaxMetadataItems)
	}
	low := make([]eim.MetadataItem, len(pairs))
	for i, it := range pairs {
		low[i] = lowerPair(it)
		if err := eim.CheckMetadataItem(fmt.Sprintf("metadata[%d]", i), low[i]); err != nil {
			return err
		}
	}
	if len(low) == 0 {
		return nil
	}
	return s.store.RecordMetadataPairs(ctx, project, low)
}

// ForgetMetadata removes a recorded pair (compared lower-cased); ENOTFOUND
// when it was not recorded. A label that a resource carries stays among
// the suggestions while it does.
func (s *Service) ForgetMetadata(ctx context.Context, project string, pair eim.MetadataItem) error {
	if err := checkProject(project); err != nil {
		return err
	}
	pair = lowerPair(pair)
	if pair.Key == "" {
		return eim.Errorf(eim.EINVALID, "key: is required")
	}
	return s.store.ForgetMetadataPair(ctx, project, pair)
}

func lowerPair(it eim.MetadataItem) eim.MetadataItem {
	return eim.MetadataItem{Key: strings.ToLower(it.Key), Value: strings.ToLower(it.Value)}
}
