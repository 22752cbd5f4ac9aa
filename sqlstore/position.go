package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/eimhq/eim"
)

// maxConsumer bounds the name of a feed consumer.
const maxConsumer = 128

func checkConsumer(consumer string) error {
	if consumer == "" || len(consumer) > maxConsumer || !utf8.ValidString(consumer) {
		return eim.Errorf(eim.EINVALID, "feed consumer %q: want a name of 1 to %d bytes of UTF-8", consumer, maxConsumer)
	}
	return nil
}

// FeedPosition implements eim.Store.
func (s *Store) FeedPosition(ctx context.Context, consumer string) (int64, bool, error) {
	if err := checkConsumer(consumer); err != nil {
		return 0, false, err
	}
	var rev int64
	err := s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT revision FROM feed_positions WHERE consumer = ?"), consumer).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.d.translate(fmt.Errorf("read the feed position of %s: %w", consumer, err), nil)
	}
	return rev, true, nil
}

// SaveFeedPosition implements eim.Store: one statement, which keeps the
// larger of the two positions.
func (s *Store) SaveFeedPosition(ctx context.Context, consumer string, rev int64) error {
	if err := checkConsumer(consumer); err != nil {
		return err
	}
	if rev < 0 {
		return eim.Errorf(eim.EINVALID, "feed position of %s: %d is negative", consumer, rev)
	}
	_, err := s.db.ExecContext(ctx, s.d.rebind("INSERT INTO feed_positions (consumer, revision, saved_at) VALUES (?, ?, ?)"+
		" ON CONFLICT (consumer) DO UPDATE SET revision = excluded.revision, saved_at = excluded.saved_at"+
		" WHERE feed_positions.revision < excluded.revision"), consumer, rev, s.now().UnixMilli())
	if err != nil {
		return s.d.translate(fmt.Errorf("save the feed position of %s: %w", consumer, err), nil)
	}
	return nil
}
