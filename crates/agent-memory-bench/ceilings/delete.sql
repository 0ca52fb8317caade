-- delete: remove one existing row by primary key from the scratch pool. Started with
-- -D seq=0 -D nc=<clients>, client c removes ids c + nc, c + 2 nc, ..., so no row is removed
-- twice; the harness sizes the pool and reports it if a run ever outran it.
\set seq :seq + 1
\set id :seq * :nc + :client_id
DELETE FROM bench_ceiling_records_del
 WHERE app = 'bench-app'
   AND user_id = 'u' || lpad((:id::bigint % 1000)::text, 4, '0')
   AND namespace = 'scratch'
   AND key = 'd' || lpad(:id::text, 8, '0');
