# bench/stages/scale.sh: the scale stage of scripts/bench.
#
# Scale: the claim's cost as the live keys grow (1M, 10M, 30M by default),
# with checkpoints inside every run (checkpoint_timeout = 30s, a CHECKPOINT
# before each), for random keys (UUIDv4-like) and time-ordered ones
# (UUIDv7-like), dedup against the seed's text table holding the same
# number of keys.  dedup's keys lie as a steady state leaves them with
# dedup.bucket_interval set so that a bucket holds --scale-bucket-keys
# (1,000,000) keys: in sealed buckets of that many, with their filters, and
# half a bucket's share in the current one (the same claim rate with a
# longer ttl: more buckets, each as big).  Both tables are filled in bulk
# (index dropped and built again); after each run its rows are deleted
# again, so that every run of a size starts from that size.
#
# Then by size: the same claims with the buckets left to their defaults
# (dedup.bucket_interval 0: an interval that follows the ttls in use, a
# day's here, so 6 hours; dedup.bucket_max_size: a sixteenth of
# shared_buffers), the keys claimed through dedup_claim_batch with a pass
# of the cleanup after each 100,000, as the worker would run: the claim's
# tps and WAL at SCALE_BYSIZE_SIZES (default "1 10") million keys, all
# claimed within what would be one 6-hour bucket.  SCALE_PARTS (default
# "steady bysize") picks the parts to run.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines scale_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== scale: $SCALE_SIZES million live keys"
q -c "ALTER SYSTEM SET checkpoint_timeout = '30s'" -c "ALTER SYSTEM SET maintenance_work_mem = '1GB'" \
  -c "SELECT pg_reload_conf()" >/dev/null
saved_duration=$DURATION
DURATION=$SCALE_DURATION
fresh
q -c "CALL dedup_cleanup()" >/dev/null
switch_bucket	# bucket 0, empty, goes: the keys live in buckets of their own
bulk_bucket() {	# RELID COUNT PREFIX: COUNT keys into a bucket, its index built again
	local rel=$1 name=${1#dedup.}
	q -c "ALTER TABLE $rel DROP CONSTRAINT ${name}_pkey" \
	  -c "INSERT INTO $rel SELECT dedup_fingerprint('$3-' || g), now() + interval '10 days'
	      FROM generate_series(1, $2) g" \
	  -c "ALTER TABLE $rel ADD CONSTRAINT ${name}_pkey PRIMARY KEY (key)" >/dev/null
}
bulk_seed() {	# COUNT PREFIX: COUNT keys, half random and half time-ordered (a day old)
	q -c "ALTER TABLE seed_idem DROP CONSTRAINT seed_idem_pkey" -c "DROP INDEX seed_idem_expires_at" \
	  -c "INSERT INTO seed_idem SELECT CASE WHEN g % 2 = 0 THEN gen_random_uuid()::text
	            ELSE (lpad(to_hex(((extract(epoch FROM now()) - 86400) * 1000)::bigint + g / 1000), 12, '0')
	                  || lpad(to_hex((random() * 4611686018427387904)::bigint), 20, '0'))::uuid::text END,
	          now() + interval '10 days'
	      FROM generate_series(1, $1) g" \
	  -c "ALTER TABLE seed_idem ADD PRIMARY KEY (key)" \
	  -c "CREATE INDEX seed_idem_expires_at ON seed_idem (expires_at)" >/dev/null
}
SCALE_PARTS=${SCALE_PARTS:-steady bysize}
SCALE_BYSIZE_SIZES=${SCALE_BYSIZE_SIZES:-1 10}
scale_part() { case " $SCALE_PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
live=0
half=$((SCALE_BUCKET_KEYS / 2))
scale_part steady || SCALE_SIZES=
for size in $SCALE_SIZES; do
	n=$((size * 1000000))
	say "  filling to $size million keys"
	# closed buckets of SCALE_BUCKET_KEYS keys each, then half a bucket's
	# share in the current one
	sealed=$(q -c "SELECT count(*) FROM dedup.claims WHERE tableoid IN (SELECT relid FROM dedup.buckets WHERE state = 's')")
	cur=$(q -c "SELECT count(*) FROM dedup.claims WHERE tableoid IN (SELECT relid FROM dedup.buckets WHERE state = 'c')")
	while [ "$sealed" -lt $((n - half)) ]; do
		add=$((SCALE_BUCKET_KEYS - cur))
		[ "$add" -le $((n - half - sealed)) ] || add=$((n - half - sealed))
		bulk_bucket "$(q -c "SELECT relid FROM dedup.buckets WHERE state = 'c'")" "$add" "fill-$size-$sealed"
		sealed=$((sealed + cur + add))
		cur=0
		switch_bucket
	done
	bulk_bucket "$(q -c "SELECT relid FROM dedup.buckets WHERE state = 'c'")" $((n - sealed - cur)) "fill-$size-current"
	bulk_seed $((n - live)) "fill-$size"
	live=$n
	q -c "VACUUM ANALYZE" >/dev/null
	TPS[scale_${size}_dedup_bytes]=$(calc "$(tree_bytes dedup.claims) / $(q -c "SELECT count(*) FROM dedup.claims")")
	TPS[scale_${size}_seed_bytes]=$(calc "$(tree_bytes seed_idem) / $(q -c "SELECT count(*) FROM seed_idem")")
	say "  $size million: $(q -c "SELECT string_agg(bucket || ':' || state::text, ' ' ORDER BY bucket) FROM dedup.buckets"); bytes per live key: dedup ${TPS[scale_${size}_dedup_bytes]}, seed ${TPS[scale_${size}_seed_bytes]}"
	# reads of sealed buckets per new key (their filters' false positives)
	{
		echo "BEGIN;"
		echo "SELECT sum(pg_stat_get_xact_numscans(i.indexrelid)) AS scans FROM dedup.buckets b JOIN pg_index i ON i.indrelid = b.relid WHERE b.state = 's' \\gset"
		echo "SELECT count(*) FROM dedup_claim_batch('probe', ARRAY(SELECT 'probe-' || g FROM generate_series(1, 100000) g));"
		echo "SELECT (sum(pg_stat_get_xact_numscans(i.indexrelid)) - :scans) / 100000.0 FROM dedup.buckets b JOIN pg_index i ON i.indrelid = b.relid WHERE b.state = 's';"
		echo "ROLLBACK;"
	} >"$OUT/log/sealed-reads.sql"
	chmod 644 "$OUT/log/sealed-reads.sql"
	TPS[scale_${size}_sealed_reads]=$(q -f "$OUT/log/sealed-reads.sql" | tail -n 1)
	say "  $size million: reads of sealed buckets per new key: ${TPS[scale_${size}_sealed_reads]}"
	for kind in v4 v7; do
		for sys in dedup seed; do
			run "scale_${size}_${sys}_$kind" "${sys}_scale_$kind.sql"
			# back to $size million keys
			q -c "DELETE FROM $(q -c "SELECT relid FROM dedup.buckets WHERE state = 'c'") WHERE expires_at < now() + interval '2 days'" \
			  -c "DELETE FROM seed_idem WHERE expires_at < now() + interval '2 days'" \
			  -c "TRUNCATE orders" -c "VACUUM" >/dev/null
		done
	done
done
if scale_part bysize; then
say "== scale by size: buckets at their defaults, $SCALE_BYSIZE_SIZES million keys claimed"
fresh
q -c "CALL dedup_cleanup()" >/dev/null
claimed=0
for size in $SCALE_BYSIZE_SIZES; do
	n=$((size * 1000000))
	say "  claiming to $size million keys"
	while [ "$claimed" -lt "$n" ]; do
		q -c "SELECT count(*) FROM dedup_claim_batch('bench', ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 100000)))" \
		  >/dev/null
		q -c "CALL dedup_cleanup()" >/dev/null
		claimed=$((claimed + 100000))
	done
	q -c "VACUUM ANALYZE" >/dev/null
	TPS[bysize_${size}_buckets]=$(q -c "SELECT count(*) FROM dedup.buckets WHERE state IN ('c', 's')")
	say "  $size million: $(q -c "SELECT string_agg(bucket || ':' || state::text, ' ' ORDER BY bucket) FROM dedup.buckets");" \
		"current bucket's index $(q -c "SELECT pg_size_pretty(pg_relation_size(relid::text || '_pkey')) FROM dedup.buckets WHERE state = 'c'")"
	run "bysize_${size}_dedup_v4" dedup_scale_v4.sql
	claimed=$((claimed + $(q -c "SELECT count(*) FROM orders")))
	q -c "TRUNCATE orders" >/dev/null
done
fi
DURATION=$saved_duration
q -c "ALTER SYSTEM RESET checkpoint_timeout" -c "ALTER SYSTEM RESET maintenance_work_mem" \
  -c "SELECT pg_reload_conf()" >/dev/null
fresh
scale_figures() {
	local first last size kind
	first=${SCALE_SIZES%% *}
	last=${SCALE_SIZES##* }
	[ -n "$SCALE_SIZES" ] && for kind in v4 v7; do
		figure_vs "scale, $kind keys: dedup tps at ${last}M live keys vs ${first}M" \
			"${TPS[scale_${last}_dedup_$kind]}" "${TPS[scale_${first}_dedup_$kind]}" ">=" 0.85
		figure_vs "scale, $kind keys: dedup WAL per claim + business at ${last}M vs ${first}M" \
			"${WALTX[scale_${last}_dedup_$kind]}" "${WALTX[scale_${first}_dedup_$kind]}" "<=" 1.3
		for size in $SCALE_SIZES; do
			figure_vs "  ($kind, ${size}M: dedup tps vs seed's)" \
				"${TPS[scale_${size}_dedup_$kind]}" "${TPS[scale_${size}_seed_$kind]}" ">=" 1
			figure_vs "  ($kind, ${size}M: dedup WAL/tx vs seed's)" \
				"${WALTX[scale_${size}_dedup_$kind]}" "${WALTX[scale_${size}_seed_$kind]}" "<=" 1
		done
	done
	for size in $SCALE_SIZES; do
		figure "  (${size}M: index reads of sealed buckets per new key)" \
			"${TPS[scale_${size}_sealed_reads]}" "" "" "-" ""
	done
	for size in $SCALE_SIZES; do
		figure_vs "  (bytes per live key on disk at ${size}M, heap + indexes, vs seed's)" \
			"${TPS[scale_${size}_dedup_bytes]}" "${TPS[scale_${size}_seed_bytes]}" "-" ""
	done
	if scale_part bysize; then
	first=${SCALE_BYSIZE_SIZES%% *}
	last=${SCALE_BYSIZE_SIZES##* }
	figure_vs "by size, defaults: claim tps at ${last}M keys claimed vs ${first}M" \
		"${TPS[bysize_${last}_dedup_v4]}" "${TPS[bysize_${first}_dedup_v4]}" ">=" 0.85
	figure_vs "by size, defaults: WAL per claim + business at ${last}M vs ${first}M" \
		"${WALTX[bysize_${last}_dedup_v4]}" "${WALTX[bysize_${first}_dedup_v4]}" "<=" 1.3
	for size in $SCALE_BYSIZE_SIZES; do
		figure "  (by size, ${size}M keys claimed: buckets holding them)" \
			"${TPS[bysize_${size}_buckets]}" "" "" "-" ""
	done
	fi
}
