//! One connection to one node of the cluster, shared by the inserts in flight of a writer.
//!
//! A round trip costs both sides far more in system calls and wake-ups than in the commands
//! themselves (measured: about 1 us a command on the commands, about 10 us a request on
//! reading it and writing the reply). So a [`NodeLink`] keeps at most one pipeline out at a
//! time: the requests that come in while it is out wait, and go out together as the next
//! pipeline, as a database commits a group of transactions with one flush. One request alone
//! goes out at once; many inserts in flight share each write, each read and, with
//! `appendfsync always`, each fsync on the node.
//!
//! Each request's commands stay together and in order, as in a pipeline of their own, which
//! is all the store's protocol relies on. A connection that drops or a reply that times out
//! (after two seconds, for the whole group) fails every request of the group: each caller
//! sends its commands again through the cluster client, as it did when each connection was
//! its own. After a failed connect the link fails requests at once for a second, so that a
//! node that is down costs the writer's steps one connect timeout, not one each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, RedisError, Value};
use tokio::sync::{mpsc, oneshot};

/// A request's replies, in the order of its commands, or why there are none.
pub(super) type Replies = Result<Vec<Value>, Arc<RedisError>>;

/// A handle on one node's connection; clones share it.
#[derive(Clone)]
pub(super) struct NodeLink {
    queue: mpsc::UnboundedSender<Request>,
}

struct Request {
    commands: Vec<Cmd>,
    replies: oneshot::Sender<Replies>,
}

impl NodeLink {
    /// Connects to the node of `client` and starts, on `runtime`, the task that sends for
    /// every clone of the link.
    pub(super) async fn connect(
        runtime: &tokio::runtime::Runtime,
        client: Client,
        config: AsyncConnectionConfig,
    ) -> Result<Self, RedisError> {
        let connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let (queue, requests) = mpsc::unbounded_channel();
        runtime.spawn(send_in_groups(requests, connection, client, config));
        Ok(NodeLink { queue })
    }

    /// Queues `commands` for the node, to go out with whatever else is waiting; the answer
    /// comes on the receiver (dropped unanswered only if the link's task is gone).
    pub(super) fn send(&self, commands: Vec<Cmd>) -> oneshot::Receiver<Replies> {
        let (replies, answer) = oneshot::channel();
        // A send fails only once the task has ended; the receiver then reports it.
        let _ = self.queue.send(Request { commands, replies });
        answer
    }
}

/// How long a link answers with its last failed connect instead of trying again.
const FAILED_CONNECT_HELD: Duration = Duration::from_secs(1);

/// Sends the queued requests, all that are waiting as one pipeline, one pipeline at a time,
/// until every handle is dropped. After a connection error it connects again for the next
/// group (whose callers see the error if that fails too).
async fn send_in_groups(
    mut requests: mpsc::UnboundedReceiver<Request>,
    connection: MultiplexedConnection,
    client: Client,
    config: AsyncConnectionConfig,
) {
    let mut connection = Some(connection);
    let mut failed_connect: Option<(Instant, Arc<RedisError>)> = None;
    while let Some(first) = requests.recv().await {
        let mut group = vec![first];
        while let Ok(request) = requests.try_recv() {
            group.push(request);
        }
        let mut pipeline = redis::pipe();
        let mut sizes = Vec::with_capacity(group.len());
        let mut answers = Vec::with_capacity(group.len());
        for request in group {
            sizes.push(request.commands.len());
            for command in request.commands {
                pipeline.add_command(command);
            }
            answers.push(request.replies);
        }
        let held = failed_connect
            .as_ref()
            .filter(|(when, _)| when.elapsed() < FAILED_CONNECT_HELD);
        let sent = match held {
            Some((_, error)) => Err(Arc::clone(error)),
            None => match connected(&mut connection, &client, &config).await {
                Ok(link) => link
                    .send_packed_commands(&pipeline, 0, pipeline.len())
                    .await
                    .map_err(Arc::new),
                Err(error) => {
                    let error = Arc::new(error);
                    failed_connect = Some((Instant::now(), Arc::clone(&error)));
                    Err(error)
                }
            },
        };
        match sent {
            Ok(values) => {
                // A short answer is the caller's to report: it checks the count it gets.
                let mut values = values.into_iter();
                for (answer, size) in answers.into_iter().zip(sizes) {
                    let _ = answer.send(Ok(values.by_ref().take(size).collect()));
                }
            }
            Err(error) => {
                if error.is_connection_dropped() || error.is_io_error() {
                    connection = None;
                }
                for answer in answers {
                    let _ = answer.send(Err(Arc::clone(&error)));
                }
            }
        }
    }
}

/// The link's connection, made again if the last one dropped.
async fn connected<'a>(
    connection: &'a mut Option<MultiplexedConnection>,
    client: &Client,
    config: &AsyncConnectionConfig,
) -> Result<&'a mut MultiplexedConnection, RedisError> {
    match connection {
        Some(link) => Ok(link),
        None => {
            let link = client
                .get_multiplexed_async_connection_with_config(config)
                .await?;
            Ok(connection.insert(link))
        }
    }
}
