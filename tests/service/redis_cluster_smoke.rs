//! The test cluster itself works: writes through the `redis` crate's async cluster client
//! reach every node, and an acknowledged write survives a node's SIGKILL and restart (its
//! append-only file). The fingerprint store's tests build on exactly these guarantees, so a
//! broken Redis setup shows up here first, with a plain message, rather than as a store bug.

use std::time::Instant;

use crate::redis_cluster::RedisCluster;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

/// Enough keys that, hashed over 16384 slots split in three, every node gets some.
const KEYS: usize = 32;

fn key(i: usize) -> String {
    format!("smoke:{i}")
}

#[test]
fn writes_reach_every_node_and_survive_a_kill_and_restart() {
    let t = Instant::now();
    let mut cluster = RedisCluster::start(3);
    eprintln!(
        "cluster of 3 up in {:?}: {}",
        t.elapsed(),
        cluster.store_arg()
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut connection = runtime.block_on(connect(&cluster));
    runtime.block_on(async {
        for i in 0..KEYS {
            redis::cmd("SET")
                .arg(key(i))
                .arg(i)
                .query_async::<()>(&mut connection)
                .await
                .unwrap();
        }
    });
    let sizes = db_sizes(&cluster);
    assert!(
        sizes.iter().all(|&n| n > 0),
        "keys did not spread over all nodes: {sizes:?}"
    );
    assert_eq!(sizes.iter().sum::<u64>(), KEYS as u64);
    assert_eq!(runtime.block_on(read_all(&mut connection)), all_values());
    assert!(cluster.used_memory() > 0);

    let t = Instant::now();
    cluster.stop_node(1);
    eprintln!("node 1 killed in {:?}", t.elapsed());
    let t = Instant::now();
    cluster.restart_node(1);
    eprintln!("node 1 restarted, cluster ok again in {:?}", t.elapsed());
    assert_eq!(
        db_sizes(&cluster),
        sizes,
        "node 1 did not reload its keys from its AOF"
    );
    // A fresh connection: whether an old one recovers from a restarted node is the store's
    // concern, not this cluster's.
    let mut connection = runtime.block_on(connect(&cluster));
    assert_eq!(runtime.block_on(read_all(&mut connection)), all_values());

    cluster.flush_all();
    assert_eq!(db_sizes(&cluster), vec![0; 3]);
    let t = Instant::now();
    drop(cluster);
    eprintln!("cluster dropped in {:?}", t.elapsed());
}

async fn connect(cluster: &RedisCluster) -> ClusterConnection {
    ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

async fn read_all(connection: &mut ClusterConnection) -> Vec<Option<usize>> {
    let mut values = Vec::with_capacity(KEYS);
    for i in 0..KEYS {
        values.push(
            redis::cmd("GET")
                .arg(key(i))
                .query_async(connection)
                .await
                .unwrap(),
        );
    }
    values
}

fn all_values() -> Vec<Option<usize>> {
    (0..KEYS).map(Some).collect()
}

/// Keys held by each node, asked directly rather than through the cluster client, which would
/// route `DBSIZE` to one node only.
fn db_sizes(cluster: &RedisCluster) -> Vec<u64> {
    cluster
        .urls()
        .iter()
        .map(|url| {
            let mut connection = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            redis::cmd("DBSIZE").query(&mut connection).unwrap()
        })
        .collect()
}
