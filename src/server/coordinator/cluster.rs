//! Commands to keys of the Redis Cluster: one at a time, or many keys read or written at once,
//! one command per key, each sent to its key's node over one multiplexed connection, all in
//! flight together. What the id directory and the sources' shared chrome keep is one key per id
//! or source, each in its own hash slot, so a batch's keys are spread over the nodes.

use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue};

use crate::{Error, Result};

/// The values of `keys`, in order (`None`: no such key). `what` names what the keys hold,
/// for errors.
pub(super) async fn get_all<T>(
    connection: &ClusterConnection,
    keys: Vec<String>,
    what: &str,
) -> Result<Vec<Option<T>>>
where
    T: FromRedisValue + Send + 'static,
{
    let mut reads = tokio::task::JoinSet::new();
    let count = keys.len();
    for (position, key) in keys.into_iter().enumerate() {
        let mut connection = connection.clone();
        reads.spawn(async move {
            let value: Option<T> = redis::cmd("GET")
                .arg(key)
                .query_async(&mut connection)
                .await?;
            Ok::<_, redis::RedisError>((position, value))
        });
    }
    let mut values: Vec<Option<T>> = (0..count).map(|_| None).collect();
    while let Some(read) = reads.join_next().await {
        let (position, value) = read
            .map_err(|error| Error::Server(format!("reading {what}: {error}")))?
            .map_err(|error| store_error(what, error))?;
        values[position] = value;
    }
    Ok(values)
}

/// Sends `commands` at once, each to its key's node; returns once every one has finished,
/// failed or not (one still on its way could land after the next write to its key).
pub(super) async fn send_all(
    connection: &ClusterConnection,
    commands: Vec<Cmd>,
    what: &str,
) -> Result<()> {
    let mut writes = tokio::task::JoinSet::new();
    for command in commands {
        let mut connection = connection.clone();
        writes.spawn(async move { command.query_async::<()>(&mut connection).await });
    }
    let mut failure = None;
    while let Some(write) = writes.join_next().await {
        let written = write
            .map_err(|error| Error::Server(format!("writing {what}: {error}")))
            .and_then(|written| written.map_err(|error| store_error(what, error)));
        if let Err(error) = written {
            failure.get_or_insert(error);
        }
    }
    failure.map_or(Ok(()), Err)
}

/// One command's answer, from its key's node.
pub(super) async fn query_one<T: FromRedisValue>(
    connection: &ClusterConnection,
    command: Cmd,
    what: &str,
) -> Result<T> {
    let mut connection = connection.clone();
    command
        .query_async(&mut connection)
        .await
        .map_err(|error| store_error(what, error))
}

/// A failure of the store of `what`, for the answer.
pub(super) fn store_error(what: &str, error: redis::RedisError) -> Error {
    Error::Server(format!("the store of {what} failed: {error}"))
}
