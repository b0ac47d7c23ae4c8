//! The read-modify-write that loses updates unless its writers exclude each other.

/// Reads the integer at `counter` (0 when there is none), yields to other tasks, then
/// writes it back plus one: two such steps that overlap lose an update.
pub async fn unguarded_increment<C>(conn: &C, counter: &str)
where
    C: redis::aio::ConnectionLike + Clone,
{
    let seen: Option<i64> = redis::cmd("GET")
        .arg(counter)
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    tokio::task::yield_now().await;
    let _: () = redis::cmd("SET")
        .arg(counter)
        .arg(seen.unwrap_or(0) + 1)
        .query_async(&mut conn.clone())
        .await
        .unwrap();
}
