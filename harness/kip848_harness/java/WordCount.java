/*
 * The harness's Kafka Streams application: a word count, built by the harness against the kafka-streams jar of the
 * release under test (kip848_harness.apps.wordcount_jar), so that every Kafka version the project runs has one.
 *
 * It is Kafka's own WordCountDemo (org.apache.kafka.streams.examples.wordcount) line for line: the same topology
 * (a repartition topic and a changelogged count store, hence the same processor, store and internal topic names),
 * the same defaults and the same clean shutdown on SIGTERM. Kafka does not publish kafka-streams-examples for every
 * release (none for 4.1.x, 4.2.1, 4.2.2 or 4.4.0), which is why the project no longer depends on it.
 *
 * Arguments: one properties file (as WordCountDemo), or "--describe-topology", which prints
 * Topology#describe() of the topology main() runs and exits (what the demo's controller reports).
 */
package kip848.harness;

import java.io.FileInputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;

public final class WordCount {
    public static final String INPUT_TOPIC = "streams-plaintext-input";
    public static final String OUTPUT_TOPIC = "streams-wordcount-output";

    private WordCount() {
    }

    static Properties streamsConfig(final String path) throws IOException {
        final Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        props.putIfAbsent(StreamsConfig.APPLICATION_ID_CONFIG, "streams-wordcount");
        props.putIfAbsent(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.putIfAbsent(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.putIfAbsent(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.putIfAbsent(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return props;
    }

    static void createWordCountStream(final StreamsBuilder builder) {
        final KStream<String, String> source = builder.stream(INPUT_TOPIC);
        final KTable<String, Long> counts = source
            .flatMapValues(value -> Arrays.asList(value.toLowerCase(Locale.getDefault()).split("\\W+")))
            .groupBy((key, value) -> value)
            .count();
        counts.toStream().to(OUTPUT_TOPIC, Produced.with(Serdes.String(), Serdes.Long()));
    }

    public static void main(final String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: WordCount <properties file> | --describe-topology");
            System.exit(2);
        }
        final StreamsBuilder builder = new StreamsBuilder();
        createWordCountStream(builder);
        if (args[0].equals("--describe-topology")) {
            System.out.print(builder.build().describe());
            return;
        }
        final KafkaStreams streams = new KafkaStreams(builder.build(), streamsConfig(args[0]));
        final CountDownLatch latch = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread("streams-wordcount-shutdown-hook") {
            @Override
            public void run() {
                streams.close();
                latch.countDown();
            }
        });
        try {
            streams.start();
            latch.await();
        } catch (final Throwable e) {
            System.exit(1);
        }
        System.exit(0);
    }
}
