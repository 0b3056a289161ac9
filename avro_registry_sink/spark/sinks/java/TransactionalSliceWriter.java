package avro_registry_sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The exactly-once slice writer of avro-registry-sink in the executors' JVM, with the Kafka client Spark's own
 * Kafka sink uses: the same protocol as {@code delivery.slice_writer} (Python), which is its reference.
 *
 * <p>Each Spark partition of the write (whole Kafka partitions, each in input order) is written in one
 * transaction of a producer whose {@code transactional.id} is {@code avro-registry-sink-<query>-<stream><n>}
 * ({@code n}: the Spark partition), with a commit token in the control topic beside the records. A task
 * attempt that finds its slice's token for the batch (an earlier attempt committed, then died) writes
 * nothing; a verdict row (non-null {@code error}) aborts the slice. One result row per slice that had rows:
 * {@code writer, status (committed | committed-before | refused), token}.
 *
 * <p>Built by {@code avro_registry_sink.spark.sinks.jvm_writer} on the driver (javac) and added to the session;
 * executors get only the spec (JSON text).
 */
public final class TransactionalSliceWriter implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The result rows' schema (the Python {@code delivery.RESULT_DDL}). */
  public static final StructType RESULT =
      new StructType()
          .add("writer", DataTypes.IntegerType)
          .add("status", DataTypes.StringType)
          .add("token", DataTypes.StringType);

  private static final String PREFIX = "avro-registry-sink";
  private static final int CONTROL_PARTITION = 0;
  /** Rows between two passes of the {@code eos.produced} failpoint (the Python writer: an Arrow batch). */
  private static final int PRODUCED_EVERY = 10_000;

  /**
   * The records of one batch, written by slice: see the class comment. The columns are {@code topic,
   * partition, key, value, headers, commit_ts, order_file} and an optional {@code error}, in this order; they
   * are read as Spark's internal rows (no conversion of each row to a {@code Row}).
   */
  public Dataset<Row> write(Dataset<Row> records, String spec) {
    String[] names = records.schema().fieldNames();
    int error = -1;
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals("error")) {
        error = i;
      }
    }
    JavaRDD<Row> results = records.queryExecution().toRdd().toJavaRDD().mapPartitions(new Slice(spec, error));
    return records.sparkSession().createDataFrame(results, RESULT);
  }

  /** The per-partition function (plain data: the spec's JSON text, the error column's index or -1). */
  static final class Slice implements FlatMapFunction<Iterator<InternalRow>, Row> {
    private static final long serialVersionUID = 1L;
    private final String specJson;
    private final int errorField;

    Slice(String specJson, int errorField) {
      this.specJson = specJson;
      this.errorField = errorField;
    }

    @Override
    public Iterator<Row> call(Iterator<InternalRow> rows) throws Exception {
      ObjectMapper json = new ObjectMapper();
      JsonNode spec = json.readTree(specJson);
      TaskContext ctx = TaskContext.get();
      int writer = ctx != null ? ctx.partitionId() : 0;
      String query = spec.get("query").asText();
      String stream = spec.get("stream").asText();
      long batch = spec.get("batch").asLong();
      double timeout = spec.get("timeout").asDouble();
      String tid = PREFIX + "-" + query + "-" + stream + writer;
      // The producer's round trips (initialising its transactions, looking for an earlier attempt's token)
      // overlap the computing of the task's input, which asking for the first row starts.
      // Only a retried task (or a task of a retried stage) can have an earlier attempt that committed its slice:
      // a first attempt skips the control topic (a rerun's driver left out what earlier runs committed).
      boolean retried = ctx != null && (ctx.attemptNumber() > 0 || ctx.stageAttemptNumber() > 0);
      CompletableFuture<Start> start =
          CompletableFuture.supplyAsync(() -> start(spec, writer, tid, batch, retried));
      boolean any;
      try {
        any = rows.hasNext();
      } catch (RuntimeException exc) { // the task's input failed: its producer must not outlive the task
        start.thenAccept(s -> s.producer.close(Duration.ZERO));
        throw exc;
      }
      Start begun;
      try {
        begun = start.get();
      } catch (ExecutionException exc) {
        throw exc.getCause() instanceof Exception ? (Exception) exc.getCause() : exc;
      }
      try {
        if (!any) {
          return Collections.emptyIterator();
        }
        String status;
        String token;
        if (begun.before != null) {
          status = "committed-before";
          token = begun.before;
        } else {
          String[] out =
              writeSlice(spec, writer, batch, query, stream, timeout, begun.producer, rows, errorField);
          status = out[0];
          token = out[1];
        }
        while (rows.hasNext()) { // a slice committed before, or refused, leaves input unread
          rows.next();
        }
        return Collections.singletonList(RowFactory.create(writer, status, token)).iterator();
      } finally {
        begun.producer.close(Duration.ofSeconds(5));
      }
    }
  }

  /** A slice's producer, its transactions initialised, and an earlier attempt's token of the batch. */
  static final class Start {
    final KafkaProducer<byte[], byte[]> producer;
    final String before;

    Start(KafkaProducer<byte[], byte[]> producer, String before) {
      this.producer = producer;
      this.before = before;
    }
  }

  @SuppressWarnings("deprecation") // fields(): properties() is missing from the Jackson of older Sparks
  static Map<String, Object> props(JsonNode conf) {
    Map<String, Object> out = new HashMap<>();
    conf.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
    return out;
  }

  static Start start(JsonNode spec, int writer, String tid, long batch, boolean retried) {
    double timeout = spec.get("timeout").asDouble();
    long deadline = System.nanoTime() + (long) (2 * timeout * 1e9);
    Failpoints.pass("eos.before-init");
    Map<String, Object> conf = props(spec.get("java_producer"));
    conf.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
    conf.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf((long) (timeout * 1000)));
    conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    conf.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    conf.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(conf);
    try {
      retrying(producer::initTransactions, deadline);
    } catch (KafkaException exc) {
      producer.close(Duration.ZERO);
      throw new IllegalStateException(
          "Writer " + writer + " of batch " + batch + " cannot start its Kafka transaction: " + exc
              + ". A broker's transaction.max.timeout.ms below transaction-timeout (" + timeout
              + " s), or a missing TransactionalId ACL for '" + tid + "', stop it here.");
    }
    String key = spec.get("query").asText() + "/" + spec.get("stream").asText() + writer;
    String before = null;
    if (!retried) {
      return new Start(producer, null);
    }
    try {
      for (String value : readCommitted(spec, key, deadline)) {
        if (new ObjectMapper().readTree(value).get("batch").asLong() == batch) {
          before = value;
        }
      }
    } catch (IOException exc) {
      producer.close(Duration.ZERO);
      throw new IllegalStateException("A token of writer " + writer + " in the control topic is not JSON: " + exc);
    } catch (RuntimeException exc) {
      producer.close(Duration.ZERO);
      throw exc;
    }
    return new Start(producer, before);
  }

  /**
   * The committed values of the control topic's records from {@code start_offset} on whose key is {@code
   * key}, in offset order: candidates first read without isolation (never blocked), then, when there are
   * any, their range again with {@code read_committed} once the last stable offset has passed them.
   */
  static List<String> readCommitted(JsonNode spec, String key, long deadline) {
    String topic = spec.get("control_topic").asText();
    TopicPartition tp = new TopicPartition(topic, CONTROL_PARTITION);
    long start = spec.get("start_offset").asLong();
    List<long[]> candidates = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> plain = consumer(spec, "read_uncommitted")) {
      plain.assign(Collections.singletonList(tp));
      long low = plain.beginningOffsets(Collections.singletonList(tp)).get(tp);
      long high = plain.endOffsets(Collections.singletonList(tp)).get(tp);
      start = Math.max(start, low);
      for (ConsumerRecord<byte[], byte[]> r : consume(plain, tp, start, high, key, deadline)) {
        candidates.add(new long[] {r.offset()});
      }
    }
    List<String> out = new ArrayList<>();
    if (candidates.isEmpty()) {
      return out;
    }
    long first = candidates.get(0)[0];
    long last = candidates.get(candidates.size() - 1)[0];
    try (KafkaConsumer<byte[], byte[]> isolated = consumer(spec, "read_committed")) {
      isolated.assign(Collections.singletonList(tp));
      long stable;
      while (true) {
        stable = isolated.endOffsets(Collections.singletonList(tp)).get(tp);
        if (stable > last) {
          break;
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(
              "A transaction stays open on the control topic '" + topic + "' (its last stable offset is "
                  + stable + ", below " + (last + 1) + "): another writer died within its "
                  + "transaction.timeout.ms. Retry later.");
        }
        sleep(50);
      }
      for (ConsumerRecord<byte[], byte[]> r : consume(isolated, tp, first, stable, key, deadline)) {
        if (r.value() != null) {
          out.add(new String(r.value(), StandardCharsets.UTF_8));
        }
      }
    }
    return out;
  }

  static KafkaConsumer<byte[], byte[]> consumer(JsonNode spec, String isolation) {
    Map<String, Object> conf = props(spec.get("java_consumer"));
    conf.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    conf.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    conf.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "20");
    conf.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    conf.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    return new KafkaConsumer<>(conf);
  }

  /** The records of {@code [start, end)} whose key is {@code key}. */
  static List<ConsumerRecord<byte[], byte[]>> consume(
      KafkaConsumer<byte[], byte[]> consumer, TopicPartition tp, long start, long end, String key,
      long deadline) {
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    if (end <= start) {
      return out;
    }
    consumer.seek(tp, start);
    while (consumer.position(tp) < end) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "Reading the control topic '" + tp.topic() + "' up to offset " + end + " timed out at "
                + consumer.position(tp) + ".");
      }
      for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
        String k = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
        if (r.offset() >= start && r.offset() < end && k.equals(key)) {
          out.add(r);
        }
      }
    }
    return out;
  }

  /** Write the slice's rows and its token in one transaction: {status, token}. */
  @SuppressWarnings("deprecation") // fields(), as in props()
  static String[] writeSlice(JsonNode spec, int writer, long batch, String query, String stream,
                             double timeout, KafkaProducer<byte[], byte[]> producer, Iterator<InternalRow> rows,
                             int errorField) throws IOException {
    long deadline = System.nanoTime() + (long) (2 * timeout * 1e9);
    JsonNode chars = spec.get("input_chars");
    Integer inputChars = chars == null || chars.isNull() ? null : chars.asInt();
    String control = spec.get("control_topic").asText();
    TreeMap<String, TreeSet<Integer>> parts = new TreeMap<>();
    TreeMap<String, TreeMap<String, Long>> newest = new TreeMap<>();
    Failure failure = new Failure();
    long count = 0;
    String refused = null;
    producer.beginTransaction();
    try {
      // A slice's rows come in runs of one topic and one input (a data file, a source partition): the strings
      // are made once a run, the newest commit ts kept in a local until the run ends.
      UTF8String topicBytes = null;
      String topic = null;
      TreeSet<Integer> topicParts = null;
      UTF8String orderBytes = null;
      String input = null;
      long runNewest = Long.MIN_VALUE;
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        if (errorField >= 0 && !row.isNullAt(errorField)) {
          refused = row.getUTF8String(errorField).toString();
          break;
        }
        UTF8String t = row.getUTF8String(0);
        UTF8String order = row.isNullAt(6) ? UTF8String.EMPTY_UTF8 : row.getUTF8String(6);
        if (!t.equals(topicBytes) || !order.equals(orderBytes)) {
          if (topic != null) {
            merge(newest, topic, input, runNewest);
          }
          if (!t.equals(topicBytes)) {
            topicBytes = t.clone(); // (the row's bytes may be reused by the next row)
            topic = t.toString();
            topicParts = parts.computeIfAbsent(topic, x -> new TreeSet<>());
          }
          orderBytes = order.clone();
          input = input(order.toString(), inputChars);
          runNewest = Long.MIN_VALUE;
        }
        int partition = row.getInt(1);
        topicParts.add(partition);
        long ts = row.isNullAt(5) ? 0L : row.getLong(5);
        if (ts > runNewest) {
          runNewest = ts;
        }
        producer.send(
            new ProducerRecord<>(topic, partition, null, row.isNullAt(2) ? null : row.getBinary(2),
                row.isNullAt(3) ? null : row.getBinary(3), headers(row)),
            failure);
        count++;
        if (count % PRODUCED_EVERY == 0) {
          Failpoints.pass("eos.produced");
        }
      }
      if (topic != null) {
        merge(newest, topic, input, runNewest);
      }
      if (refused == null && count % PRODUCED_EVERY != 0) {
        Failpoints.pass("eos.produced");
      }
      if (refused != null) {
        producer.abortTransaction();
        return new String[] {"refused", refused};
      }
      JsonNode done = spec.get("committed");
      TreeMap<String, TreeSet<Integer>> committed = new TreeMap<>();
      if (done != null && done.isObject()) {
        done.fields().forEachRemaining(e -> {
          TreeSet<Integer> ps = committed.computeIfAbsent(e.getKey(), t -> new TreeSet<>());
          e.getValue().forEach(p -> ps.add(p.asInt()));
        });
      }
      parts.forEach((t, ps) -> committed.computeIfAbsent(t, x -> new TreeSet<>()).addAll(ps));
      ObjectMapper json = new ObjectMapper();
      ObjectNode token = json.createObjectNode();
      token.put("batch", batch);
      ObjectNode inputs = token.putObject("inputs");
      newest.forEach((t, byInput) -> {
        ObjectNode of = inputs.putObject(t);
        byInput.forEach(of::put);
      });
      token.put("kind", "token");
      ObjectNode partsNode = token.putObject("parts");
      committed.forEach((t, ps) -> {
        var array = partsNode.putArray(t);
        ps.forEach(array::add);
      });
      token.put("query", query);
      token.put("rows", count);
      token.put("stream", stream);
      token.put("time", Math.round(System.currentTimeMillis()) / 1000.0);
      token.put("v", 1);
      token.put("writer", writer);
      String text = json.writeValueAsString(token);
      producer.send(new ProducerRecord<>(control, CONTROL_PARTITION, null,
          (query + "/" + stream + writer).getBytes(StandardCharsets.UTF_8),
          text.getBytes(StandardCharsets.UTF_8)), failure);
      Failpoints.pass("eos.before-commit");
      retrying(producer::commitTransaction, deadline);
      Failpoints.pass("eos.after-commit");
      return new String[] {"committed", text};
    } catch (KafkaException exc) {
      try {
        producer.abortTransaction(); // the next attempt's initTransactions aborts it anyway
      } catch (KafkaException ignored) {
        // fenced or fatal: nothing more to do here
      }
      String detail = failure.first != null ? failure.first : String.valueOf(exc);
      throw new IllegalStateException(
          "Writer " + writer + " of batch " + batch + " could not commit its Kafka transaction: " + detail
              + ". Nothing of this slice is visible to read_committed consumers; the batch is not committed "
              + "and a rerun writes it.");
    }
  }

  /** The first failed delivery, for the error. */
  static final class Failure implements org.apache.kafka.clients.producer.Callback {
    volatile String first;

    @Override
    public void onCompletion(org.apache.kafka.clients.producer.RecordMetadata m, Exception exc) {
      if (exc != null && first == null) {
        first = (m != null ? m.topic() + "[" + m.partition() + "]: " : "") + exc;
      }
    }
  }

  static void merge(TreeMap<String, TreeMap<String, Long>> newest, String topic, String input, long ts) {
    TreeMap<String, Long> byInput = newest.computeIfAbsent(topic, t -> new TreeMap<>());
    Long had = byInput.get(input);
    if (had == null || had < ts) {
      byInput.put(input, ts);
    }
  }

  static Iterable<Header> headers(InternalRow row) {
    if (row.isNullAt(4)) {
      return null;
    }
    ArrayData list = row.getArray(4);
    int n = list.numElements();
    List<Header> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      InternalRow h = list.getStruct(i, 2);
      out.add(new RecordHeader(h.getUTF8String(0).toString(), h.isNullAt(1) ? null : h.getBinary(1)));
    }
    return out;
  }

  /** A row's input, as the Python {@code delivery._partition_input} names it. */
  static String input(String orderFile, Integer inputChars) {
    if (inputChars == null) {
      return orderFile;
    }
    if (inputChars == 0) {
      return "";
    }
    return orderFile.length() <= inputChars ? orderFile : orderFile.substring(0, inputChars);
  }

  /** {@code call} again while the Kafka client calls its error retriable (a timeout, a moving coordinator). */
  static void retrying(Runnable call, long deadline) {
    while (true) {
      try {
        call.run();
        return;
      } catch (RetriableException exc) {
        if (System.nanoTime() > deadline) {
          throw exc;
        }
      }
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException exc) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", exc);
    }
  }

  /** The failpoints of {@code avro_registry_sink.failpoints}, in this JVM (same variables, same actions). */
  static final class Failpoints {
    private static final Map<String, Integer> HITS = new HashMap<>();
    private static String seen = "";

    static synchronized void pass(String name) {
      String spec = setting("AVRO_SINK_FAILPOINTS");
      if (spec == null || spec.isEmpty()) {
        return;
      }
      if (spec.startsWith("@")) {
        try {
          spec = new String(Files.readAllBytes(Paths.get(spec.substring(1))), StandardCharsets.UTF_8).trim();
        } catch (IOException exc) {
          spec = "";
        }
        if (!spec.equals(seen)) {
          seen = spec;
          HITS.clear();
        }
        if (spec.isEmpty()) {
          return;
        }
      }
      boolean named = false;
      for (String item : spec.split(",")) {
        if (item.trim().split("=", 2)[0].equals(name)) {
          named = true;
        }
      }
      if (!named) {
        return;
      }
      int count = count(name);
      for (String item : spec.split(",")) {
        String[] pa = item.trim().split("=", 2);
        if (!pa[0].equals(name) || pa.length < 2) {
          continue;
        }
        String[] ka = pa[1].split("@", 2);
        int nth = ka.length > 1 && !ka[1].isEmpty() ? Integer.parseInt(ka[1]) : 1;
        if (count != nth) {
          continue;
        }
        switch (ka[0]) {
          case "pause": {
            String counts = setting("AVRO_SINK_FAILPOINT_COUNTS");
            if (counts != null && !counts.isEmpty()) {
              try {
                Files.write(Paths.get(counts, name + ".paused"),
                    String.valueOf(ProcessHandle.current().pid()).getBytes(StandardCharsets.UTF_8));
              } catch (IOException ignored) {
                // the test waits for the file: it then sees nothing paused
              }
            }
            String pause = setting("AVRO_SINK_FAILPOINT_PAUSE");
            sleep((long) (1000 * Double.parseDouble(pause == null || pause.isEmpty() ? "3" : pause)));
            break;
          }
          case "kill":
            kill(ProcessHandle.current().pid());
            break;
          case "kill-driver": {
            String driver = setting("AVRO_SINK_FAILPOINT_DRIVER");
            kill(driver == null || driver.isEmpty() ? ProcessHandle.current().pid() : Long.parseLong(driver));
            break;
          }
          case "raise":
            throw new IllegalStateException("failpoint " + name + " (pass " + count + ")");
          default:
            break;
        }
      }
    }

    /** A variable of the environment, else the Java system property of that name (a running JVM's
     * environment is fixed: a test sets the property in a local session's JVM). */
    private static String setting(String name) {
      String value = System.getenv(name);
      return value != null && !value.isEmpty() ? value : System.getProperty(name);
    }

    private static int count(String name) {
      String counts = setting("AVRO_SINK_FAILPOINT_COUNTS");
      if (counts != null && !counts.isEmpty()) {
        File file = new File(counts, name);
        try (FileOutputStream out = new FileOutputStream(file, true)) {
          out.write('.');
          out.flush();
          return (int) out.getChannel().size();
        } catch (IOException exc) {
          throw new IllegalStateException("failpoint counts: " + exc);
        }
      }
      int n = HITS.getOrDefault(name, 0) + 1;
      HITS.put(name, n);
      return n;
    }

    private static void kill(long pid) {
      try {
        new ProcessBuilder("kill", "-9", String.valueOf(pid)).inheritIO().start().waitFor();
      } catch (IOException | InterruptedException exc) {
        Runtime.getRuntime().halt(137);
      }
      Runtime.getRuntime().halt(137);
    }
  }
}
